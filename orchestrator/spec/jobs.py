"""Finding and reading job definitions: a path, or the name of a built-in job in jobs/."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from orchestrator.errors import UserError
from orchestrator.spec.builtin import builtin_dir
from orchestrator.spec.loading import load_json
from orchestrator.spec.models import Job


class JobReader(Protocol):
    """What loading a job asks of a study (studies/base.py): the registry of studies sits above
    spec/, so the caller passes it in (orchestrator/session.py passes the registered ones)."""

    format_hint: str

    def reads(self, path: Path) -> bool: ...

    def read_path(self, path: Path, job_id: str) -> Job: ...

    def recognises(self, data: Any) -> bool: ...

    def read(self, data: Any, path: Path, job_id: str) -> Job: ...


# Built-in jobs renamed to their study's name (0.2.0). A config or a run's manifest that names
# one the old way still finds it, and keeps the old name as the job's id: the id is part of
# every task id, so a run started under the old name resumes and compares as before.
FORMER_NAMES = {
    "ai-bias-benchmark": "paired",
    "eleven-biases": "bias-strength",
    "ai-judge-history": "judge-history",
    "instructed-to-bias": "instructed",
}


def builtin_jobs() -> list[str]:
    return sorted(
        p.stem for suffix in ("*.json", "*.jsonl") for p in builtin_dir("jobs").glob(suffix)
    )


def _is_job(path: Path) -> bool:
    """A job file, or a folder a study reads as one (a run folder, whose traces are audited)."""
    return path.is_file() or (path.is_dir() and (path / "manifest.json").is_file())


def resolve_job_path(ref: str, base: Path) -> Path:
    builtin = builtin_dir("jobs")
    name = FORMER_NAMES.get(ref, ref)
    for candidate in (
        base / ref,
        Path(ref),
        builtin / name,
        builtin / f"{name}.json",
        builtin / f"{name}.jsonl",
    ):
        if _is_job(candidate):
            return candidate
    raise UserError(
        f"job '{ref}' is neither a file nor a built-in job",
        field="jobs",
        fix=f"use a path to a job file or one of: {', '.join(builtin_jobs())}",
    )


def load_job(path: Path, studies: Sequence[JobReader]) -> Job:
    """A job file in the format of whichever of `studies` recognises it."""
    if not studies:
        raise TypeError("load_job needs the studies whose readers know the job formats")
    for study in studies:
        if study.reads(path):  # a source that is not a JSON job file
            return study.read_path(path, job_id=path.stem)
    data = load_json(path, "job file")
    for study in studies:
        if study.recognises(data):
            return study.read(data, path, job_id=path.stem)
    raise UserError(
        "unrecognised job format",
        file=str(path),
        fix="use " + ", or ".join(study.format_hint for study in studies),
    )

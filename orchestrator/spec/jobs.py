"""Finding and reading job definitions: a path, or the name of a built-in job in jobs/."""

from __future__ import annotations

import os
import re
import tomllib
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


def resolve_job_path(ref: str, base: Path, output_dir: str | None = None) -> Path:
    """The job `ref` names: a path relative to the config's folder `base` or to the current
    one, or a built-in job. A run folder not made yet is told apart (`output_dir`: where the
    config's own runs go), with the run that makes it."""
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
    if (missing := _run_to_make(ref, base, output_dir)) is not None:
        raise missing
    raise UserError(
        f"job '{ref}' is neither a file nor a built-in job",
        field="jobs",
        fix=f"use a path to a job file or one of: {', '.join(builtin_jobs())}",
    )


# The names a run folder gets by itself: the default run id, and those of runs named by date
# (--run-id auto: DATE, DATE-2, ...; `latest` links the newest of them).
_RUN_ID = re.compile(r"default|latest|\d{4}-\d{2}-\d{2}(-\d+)?")


def _run_to_make(ref: str, base: Path, output_dir: str | None) -> UserError | None:
    """For a job that names a run folder not made yet (a folder of a campaign folder, of the
    config's own output_dir, named as a run is, or of a campaign a config beside it runs), the
    error saying which run makes it; None for anything else (a job file that is missing)."""
    given = Path(ref)
    if given.suffix.lower() in (".json", ".jsonl", ".toml") or len(given.parts) < 2:
        return None
    candidates = list(dict.fromkeys([base / given, given]))
    campaign, run_id = given.parent.name, given.name
    makers = _makers(campaign, run_id, candidates, base)
    out = Path(output_dir).resolve() if output_dir else None
    if not (
        makers
        or _RUN_ID.fullmatch(run_id)
        or any(_holds_runs(c.parent) for c in candidates)
        or (out is not None and any(c.resolve().is_relative_to(out) for c in candidates))
    ):
        return None
    folder = next((c for c in candidates if c.is_dir()), None)
    what = (
        f"job '{ref}' is not a run folder yet (it holds no manifest.json)"
        if folder is not None
        else f"job '{ref}' is a run folder that does not exist yet"
    )
    if makers:
        config, command = makers[0]
        return UserError(
            f"{what}: the campaign '{campaign}' of {config} makes it",
            field="jobs",
            fix=f"run {config} first: {command}; then run this config again",
        )
    return UserError(
        f"{what}; a run makes it",
        field="jobs",
        fix=f"run the campaign '{campaign}' first (the config with name = \"{campaign}\"), "
        f"to make its run '{run_id}'; or give the path of a run folder that exists",
    )


def _holds_runs(folder: Path) -> bool:
    """A campaign folder: one that holds a run folder."""
    try:
        return folder.is_dir() and any((p / "manifest.json").is_file() for p in folder.iterdir())
    except OSError:
        return False


def _makers(
    campaign: str, run_id: str, candidates: list[Path], base: Path
) -> list[tuple[str, str]]:
    """(config, the command that makes the run folder) for each config beside this one, or in
    the current folder, that runs the campaign: those whose runs go to that very folder first."""
    found: list[tuple[bool, str, str]] = []
    folders = {c.parent.resolve() for c in candidates}
    for config in sorted(
        {p.resolve(): p for d in (base, Path()) for p in d.glob("*.toml")}.values()
    ):
        try:
            raw = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if raw.get("name") != campaign or not isinstance(raw.get("output_dir", "runs"), str):
            continue
        here = (Path(raw.get("output_dir", "runs")) / campaign).resolve()
        args = ["orchestrator", "run", _shown(config)]
        if raw.get("run_id", "default") != run_id:
            args += ["--run-id", "auto" if run_id == "latest" else run_id]
        if here not in folders:  # its runs go elsewhere
            args += ["--output-dir", _shown(candidates[-1].parent.parent)]
        found.append((here not in folders, _shown(config), " ".join(args)))
    return [(config, command) for _, config, command in sorted(found)]


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the current folder when inside it."""
    relative = os.path.relpath(path.resolve())
    return str(path) if relative.startswith("..") else relative


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
        file=path,
        fix="use " + ", or ".join(study.format_hint for study in studies),
    )

"""Finding and reading job definitions: a path, or the name of a built-in job in jobs/."""
from __future__ import annotations

from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.spec.builtin import builtin_dir
from orchestrator.spec.loading import load_json
from orchestrator.spec.models import Job
from orchestrator.spec.seed000 import is_seed000, job_from_seed000
from orchestrator.spec.native import is_native, job_from_native
from orchestrator.spec.seed002 import is_seed002, job_from_seed002


def builtin_jobs() -> list[str]:
    return sorted(p.stem for p in builtin_dir("jobs").glob("*.json"))


def resolve_job_path(ref: str, base: Path) -> Path:
    builtin = builtin_dir("jobs")
    for candidate in (base / ref, Path(ref), builtin / ref, builtin / f"{ref}.json"):
        if candidate.is_file():
            return candidate
    raise UserError(f"job '{ref}' is neither a file nor a built-in job", field="jobs",
                    fix=f"use a path to a job file or one of: {', '.join(builtin_jobs())}")


def load_job(path: Path) -> Job:
    data = load_json(path, "job file")
    if is_seed000(data):
        return job_from_seed000(data, path, job_id=path.stem)
    if is_native(data):
        return job_from_native(data, path, job_id=path.stem)
    if is_seed002(data):
        return job_from_seed002(data, path, job_id=path.stem)
    raise UserError("unrecognised job format", file=str(path),
                    fix="use the AI Bias Benchmark format (top-level 'protocol' and 'experiments') "
                        "or the AI Judge History format ('studyId', 'design', 'tasks')")

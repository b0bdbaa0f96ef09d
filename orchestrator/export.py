"""What study exports share: a run's checked records read in bounded memory.

An exporter takes where each task's final record is (results.final_mask: its first terminal
one, ok, parse_error, refused or too_long, else its last `failed` attempt) from the columnar
snapshot, which checks the log's lines as every reader does (engine/columnar.py), and parses
only those records, from the memory-mapped log (the snapshot keeps only an answer's start).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from orchestrator.engine.files import folder_within, write_file
from orchestrator.engine.results import ResultLines, unparsable
from orchestrator.errors import UserError
from orchestrator.formats import EXPORT_FORMAT, FIELD
from orchestrator.spec.models import FORMER_KINDS


def jobs_of_kind(manifest: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """The manifest's jobs of a study (under its former kind too: a run from before 0.2.0)."""
    return {
        k: v
        for k, v in manifest.get("jobs", {}).items()
        if FORMER_KINDS.get(v.get("kind"), v.get("kind")) == kind
    }


INFO = "export.toml"


def check_export_folder(run_dir: Path, target: Path) -> None:
    """Where an export goes, checked before anything is written (and made only when a file is):
    inside the run folder (its default, RUN_DIR/export/FORMAT), no folder on the way may be a
    link, since a run folder from someone else may hold one; a folder the user named is theirs
    to choose."""
    inside = Path(os.path.abspath(target)).is_relative_to(os.path.abspath(run_dir))
    folder_within(run_dir if inside else target, target, make=False)


def _shown(path: Path, target: Path) -> str:
    return str(path.relative_to(target)) if path.is_relative_to(target) else path.name


def write_info(
    target: Path, format: str, run_dir: Path, manifest: dict[str, Any], counts: dict[Path, int]
) -> Path:
    """export.toml beside the exported files: the format and its version, the software that
    wrote them and the run they come from. TOML, not JSON, so that tools reading every .json
    file of the folder (the published scorers do) are not handed it."""
    from orchestrator import __version__

    def text(value: str) -> str:  # a TOML basic string is a JSON string
        return orjson.dumps(value).decode()

    lines = [
        f"# written by bias-orchestrator {__version__}; what the files beside it are",
        f"format = {text(format)}",
        f"{FIELD} = {EXPORT_FORMAT}",
        f"software = {text(__version__)}",
        f"run = {text(str(run_dir.resolve()))}",
        f"run_software = {text(str(manifest.get('software', '')))}",
        f"created_at = {datetime.now(UTC).isoformat(timespec='seconds')}",
        "",
        "[records]  # per file",
        *(f"{text(_shown(path, target))} = {n}" for path, n in sorted(counts.items())),
        "",
    ]
    return write_file(target / INFO, "\n".join(lines).encode(), within=target)


def final_records(
    path: Path, jobs: Collection[str]
) -> Iterator[tuple[str, str, int, int, dict[str, Any]]]:
    """(taskId, status, offset, length, record) of each task's final record in `jobs`, in the
    log's order. The log is checked first, and refused (UserError) if a line is not a record,
    before anything is yielded."""
    import polars as pl

    from orchestrator.engine.columnar import final_rows, lines_at

    final = final_rows(path, ["job", "offset"]).filter(pl.col("job").is_in(list(jobs)))
    rows = final.select("taskId", "status", "offset").rows()
    for (task_id, status, offset), line in zip(rows, lines_at(path, final["offset"]), strict=True):
        yield task_id, status, offset, len(line), _parse(path, line)


def records(path: Path, terminal_only: bool) -> Iterator[tuple[str, str, int, int, dict[str, Any]]]:
    """(taskId, status, offset, length, record) of every line (or every terminal one), parsed;
    the file is checked as it is read, and refused (UserError) at the end if a line is not a
    record, before anything is written."""
    lines = ResultLines(path)
    for task_id, status, _, offset, line in lines.records():
        if not (terminal_only and status == "failed"):
            yield task_id, status, offset, len(line), _parse(path, line)
    lines.check()


def _parse(path: Path, line: bytes) -> dict[str, Any]:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:  # passed the cheap check: a record glued to a torn line
        raise unparsable(path) or UserError(f"a line of {path} is not JSON", file=path) from None


class mapped:
    """The results file memory-mapped for reading (records are read back by offset)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "rb")
        size = self._file.seek(0, 2)
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else None

    def __enter__(self) -> mmap.mmap:
        return self._map

    def __exit__(self, *exc: object) -> None:
        if self._map is not None:
            self._map.close()
        self._file.close()

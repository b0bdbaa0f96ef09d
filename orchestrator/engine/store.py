"""The run directory: manifest.json, and results.ndjson written once per task by one writer."""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from orchestrator.errors import PlanChangedError, UserError
from orchestrator.plan import describe_changes

MANIFEST = "manifest.json"
RESULTS = "results.ndjson"
_PREFIX = b'{"taskId":"'
_ID_END = len(_PREFIX) + 32
_STATUS_AT = _ID_END + len(b'","status":"')
_MODEL_KEY = b'"modelKey":"'


@dataclass
class Scan:
    """What a results file already holds."""

    done: set[str] = field(default_factory=set)
    done_by_model: Counter = field(default_factory=Counter)
    repaired_bytes: int = 0


def repair_tail(path: Path) -> int:
    """Cut a torn last line (a write interrupted by a crash); returns the bytes removed."""
    if not path.exists():
        return 0
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        back = min(size, 1 << 16)
        while True:
            f.seek(size - back)
            tail = f.read(back)
            cut = tail.rfind(b"\n")
            if cut != -1 or back == size:
                break
            back = min(size, back * 4)
        keep = size - back + cut + 1 if cut != -1 else 0
        if keep != size:
            f.truncate(keep)
        return size - keep


def _fields(line: bytes) -> tuple[str, str, str]:
    """(taskId, status, modelKey) of a record line: by position for our own lines, else JSON."""
    if line.startswith(_PREFIX) and line[_ID_END:_ID_END + 1] == b'"':
        end = line.index(b'"', _STATUS_AT)
        k = line.find(_MODEL_KEY, end) + len(_MODEL_KEY)
        return (line[len(_PREFIX):_ID_END].decode(), line[_STATUS_AT:end].decode(),
                line[k:line.index(b'"', k)].decode())
    rec = orjson.loads(line)
    return rec["taskId"], rec["status"], rec.get("modelKey", "")


def scan_results(path: Path) -> Scan:
    scan = Scan(repaired_bytes=repair_tail(path))
    if not path.exists():
        return scan
    done, by_model = scan.done, scan.done_by_model
    with open(path, "rb") as f:
        for line in f:
            task_id, status, model_key = _fields(line)
            if status != "failed" and task_id not in done:
                done.add(task_id)
                by_model[model_key] += 1
    return scan


def spent_so_far(path: Path) -> float:
    """USD the run's recorded calls cost (a budget covers the whole run, across resumes)."""
    if not path.exists() or path.stat().st_size == 0:
        return 0.0
    import polars as pl
    total = (pl.scan_ndjson(path, schema={"costUsd": pl.Float64}, ignore_errors=True)
             .select(pl.col("costUsd").sum()).collect().item())
    return float(total or 0.0)


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """The final record of every task: a later terminal record supersedes a `failed` one."""
    final: dict[str, dict[str, Any]] = {}
    if path.exists():
        with open(path, "rb") as f:
            for line in f:
                if line.endswith(b"\n"):
                    rec = orjson.loads(line)
                    if rec["taskId"] not in final or final[rec["taskId"]]["status"] == "failed":
                        final[rec["taskId"]] = rec
    yield from final.values()


class RunStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.results = path / RESULTS
        self.manifest_path = path / MANIFEST

    def read_manifest(self) -> dict[str, Any]:
        try:
            return orjson.loads(self.manifest_path.read_bytes())
        except FileNotFoundError:
            raise UserError("not a run directory (no manifest.json)", file=str(self.path),
                            fix="point to runs/<campaign>/<run-id>/ as printed by 'orchestrator run'") from None
        except orjson.JSONDecodeError as exc:
            raise UserError(f"manifest.json is corrupt: {exc}", file=str(self.manifest_path),
                            fix="restore it, or start a new run with --run-id") from None

    def check(self, manifest: dict[str, Any], resume_hint: str) -> bool:
        """Whether the run exists; if it does, that its plan is this one. Writes nothing."""
        if not self.manifest_path.exists():
            return False
        old = self.read_manifest()["plan"]
        changes = describe_changes(old, manifest["plan"])
        if changes:
            raise PlanChangedError(
                "the plan differs from the one this run was started with:\n    "
                + "\n    ".join(changes), file=str(self.path),
                fix=f"undo the config change to resume, or start a new run: {resume_hint}")
        return True

    def open(self, manifest: dict[str, Any], resume_hint: str) -> bool:
        """Create the run, or check that an existing one has the same plan; True if it existed."""
        if self.check(manifest, resume_hint):
            return True
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        os.replace(tmp, self.manifest_path)
        return False

    def writer(self, on_record: Callable[[dict[str, Any]], None]) -> ResultWriter:
        return ResultWriter(self.results, on_record)


class ResultWriter:
    """The one writer of results.ndjson. Workers hand it records from the event loop's single
    thread, and append() never awaits, so lines can never interleave; a flusher pushes the
    buffer to the OS a few times a second, which is what a crash can lose (those tasks rerun)."""

    def __init__(self, path: Path, on_record: Callable[[dict[str, Any]], None]) -> None:
        self._file = open(path, "ab")
        self._on_record = on_record

    def append(self, record: dict[str, Any]) -> None:
        self._file.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
        self._on_record(record)

    async def flush_every(self, seconds: float) -> None:
        while True:
            await anyio.sleep(seconds)
            self._file.flush()

    def close(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()

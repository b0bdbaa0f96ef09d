"""The run directory: manifest.json, and results.ndjson written once per task by one writer."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from orchestrator.engine.files import open_append, private_folder, replace_whole
from orchestrator.engine.paid import Paid, paid_in
from orchestrator.engine.results import RESULTS, ResultLines
from orchestrator.errors import PlanChangedError, UserError
from orchestrator.formats import FIELD, RUN_FORMAT
from orchestrator.plan_changes import describe_changes

MANIFEST = "manifest.json"


@dataclass
class Scan:
    """What a results file already holds."""

    done: set[str] = field(default_factory=set)
    done_by_model: Counter = field(default_factory=Counter)
    repaired_bytes: int = 0
    # unfinished tasks of scoring models -> the options their last failed attempt paid for
    paid: dict[str, Paid] = field(default_factory=dict)


def scan_results(path: Path, scored: Collection[str] = ()) -> Scan:
    """The finished tasks of a run, for resume, and what failed attempts of the `scored`
    models' tasks paid for. A line that is not a record refuses the run before anything is
    written; a torn last line is cut, once the whole file has been checked."""
    lines = ResultLines(path)
    done, by_model, failed = lines.finished(scored)
    lines.check()
    paid = {task_id: found for task_id, line in failed.items() if (found := paid_in(line))}
    scan = Scan(done, by_model, paid=paid)
    if lines.torn_bytes:
        with open(path, "r+b") as f:
            if f.seek(0, os.SEEK_END) != lines.complete_bytes + lines.torn_bytes:
                raise UserError(
                    "the results file grew while it was read",
                    file=path,
                    fix="make sure no other process writes to this run, then run again",
                )
            f.truncate(lines.complete_bytes)
        scan.repaired_bytes = lines.torn_bytes
    return scan


def spent_so_far(path: Path) -> float:
    """USD the run's recorded calls cost (a budget covers the whole run, across resumes).
    Read after scan_results, which has checked every line."""
    if not path.exists() or path.stat().st_size == 0:
        return 0.0
    import polars as pl

    total = (
        pl.scan_ndjson(path, schema={"costUsd": pl.Float64}, ignore_errors=True)
        .select(pl.col("costUsd").sum())
        .collect()
        .item()
    )
    return float(total or 0.0)


# What the readers of a manifest rely on. `jobs` and `models` are missing in runs made by older
# versions (their readers say so); "*" is every value of an object or item of a list.
_REQUIRED = (
    ("campaign", str),
    ("runId", str),
    ("createdAt", str),
    ("config", dict),
    ("plan", dict),
    ("plan.hash", str),
    ("plan.jobs", list),
    ("plan.models", list),
    ("plan.models.*", dict),
    ("plan.per_model", dict),
    ("plan.per_model.*", int),
    ("plan.samples", dict),
    ("plan.samples.*", int),
)
_OPTIONAL = (
    ("jobs", dict),
    ("jobs.*", dict),
    ("models", dict),
    ("plan.strategies", dict),
    ("plan.prompts", dict),
    ("plan.samples_by_model", dict),
    ("plan.samples_by_model.*", dict),
    ("plan.samples_by_model.*.*", int),
)
_MISSING = object()
_TYPE_NAMES = {str: "a string", dict: "an object", list: "a list", int: "a whole number"}


def _values(doc: Any, parts: list[str], where: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted name, value) of every field a path names; _MISSING where one is absent."""
    if not parts:
        yield where, doc
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        items = (
            doc.items()
            if isinstance(doc, dict)
            else enumerate(doc)
            if isinstance(doc, list)
            else ()
        )
        for k, v in items:
            yield from _values(
                v, rest, f"{where}.{k}" if isinstance(doc, dict) else f"{where}[{k}]"
            )
    elif isinstance(doc, dict):
        yield from _values(doc.get(head, _MISSING), rest, f"{where}.{head}" if where else head)


def _shape_error(manifest: Any) -> tuple[str, str] | None:
    """(field, what is wrong with it) for the first field of a manifest its readers cannot use."""
    if not isinstance(manifest, dict):
        return "", f"it holds a JSON {type(manifest).__name__}, not an object"
    for spec, required in ((_REQUIRED, True), (_OPTIONAL, False)):
        for path, kind in spec:
            for where, value in _values(manifest, path.split(".")):
                if value is _MISSING:
                    if required:
                        return where, "it is missing"
                elif not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                    return where, f"it should be {_TYPE_NAMES[kind]}, not {type(value).__name__}"
    return None


class RunStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.results = path / RESULTS
        self.manifest_path = path / MANIFEST

    def _check_folder(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise UserError(
                "this is a file, not a run folder",
                file=str(self.path),
                fix="point to the run folder runs/<campaign>/<run-id>/ as printed by "
                "'orchestrator run' (the folder holding manifest.json)",
            )

    def read_manifest(self) -> dict[str, Any]:
        self._check_folder()
        fix = (
            "restore manifest.json from a copy of this run folder (it is written once, when the "
            "run starts), or start a new run with --run-id"
        )
        try:
            raw = self.manifest_path.read_bytes()
        except FileNotFoundError:
            raise UserError(
                "not a run directory (no manifest.json)",
                file=str(self.path),
                fix="point to runs/<campaign>/<run-id>/ as printed by 'orchestrator run'",
            ) from None
        except OSError as exc:  # a folder named manifest.json, no permission, ...
            raise UserError(
                f"manifest.json cannot be read ({exc.strerror})",
                file=str(self.manifest_path),
                fix=fix,
            ) from None
        if raw.startswith(b"\xef\xbb\xbf"):
            raise UserError(
                "manifest.json starts with a UTF-8 byte-order mark (BOM), which JSON does "
                "not allow",
                file=str(self.manifest_path),
                fix="save it as UTF-8 without a BOM (the first three bytes EF BB BF removed)",
            )
        try:
            manifest = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise UserError(
                f"manifest.json is corrupt: {exc}", file=str(self.manifest_path), fix=fix
            ) from None
        problem = _shape_error(manifest)
        if problem:
            where, what = problem
            raise UserError(
                f"manifest.json is not a run manifest: {what}",
                file=str(self.manifest_path),
                field=where or None,
                fix=fix,
            )
        version = manifest.get(FIELD, 1)
        if not isinstance(version, int) or isinstance(version, bool) or version > RUN_FORMAT:
            raise UserError(
                f"this run was written in run format {version!r} (by bias-orchestrator "
                f"{manifest.get('software', '?')}); this version reads format {RUN_FORMAT} "
                "and earlier",
                file=str(self.manifest_path),
                field=FIELD,
                fix="read it with the version that wrote it, or a later one (pip install -U "
                "bias-orchestrator)",
            )
        return manifest

    def check(self, manifest: dict[str, Any], resume_hint: str) -> bool:
        """Whether the run exists; if it does, that its plan is this one. Writes nothing."""
        self._check_folder()
        if not self.manifest_path.exists():
            return False
        old = self.read_manifest()["plan"]
        changes = describe_changes(old, manifest["plan"])
        if changes:
            raise PlanChangedError(
                "the plan differs from the one this run was started with:\n    "
                + "\n    ".join(changes),
                file=str(self.path),
                fix=f"undo the config change to resume, or start a new run: {resume_hint}",
            )
        return True

    def open(self, manifest: dict[str, Any], resume_hint: str) -> bool:
        """Create the run, or check that an existing one has the same plan; True if it existed."""
        if self.check(manifest, resume_hint):
            return True
        from orchestrator.engine.endpoints import seal_manifest

        private_folder(self.path)
        data = orjson.dumps(manifest, option=orjson.OPT_INDENT_2)
        replace_whole(self.manifest_path, data)
        seal_manifest(self.path, data)  # this user's: resuming it sends keys without asking
        return False

    def writer(self, on_record: Callable[[dict[str, Any]], None]) -> ResultWriter:
        return ResultWriter(self.results, on_record)


class ResultWriter:
    """The one writer of results.ndjson. Workers hand it records from the event loop's single
    thread, and append() never awaits, so lines can never interleave; a flusher pushes the
    buffer to the OS a few times a second, which is what a crash can lose (those tasks rerun)."""

    def __init__(self, path: Path, on_record: Callable[[dict[str, Any]], None]) -> None:
        self._file = open_append(path)
        self._on_record = on_record

    def append(self, record: dict[str, Any]) -> None:
        self._file.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
        self._on_record(record)

    async def flush_every(self, seconds: float) -> None:
        while True:
            await anyio.sleep(seconds)
            self._file.flush()

    def sync(self) -> None:
        """On disk now: a batch is journalled as collected only after its records are."""
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()

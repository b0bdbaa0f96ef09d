"""Reading results.ndjson: every line is one of our records, or the reader says which is not.

Our writer puts taskId, status and modelKey first (see records.make_record), so a line that
starts with that fixed layout and ends with `}` is read by position, without parsing JSON: a
million lines take about as long as reading them. Any other line gets a JSON parse and a field
check; one that fails both is reported by line number (a blank line, a garbage line, another
program's JSON), and the verb stops before it changes anything. Resume, status, analysis,
report and export all read through here. Two things pass differently:

- a torn last line with no newline (a write cut short, or one still being written): readers
  skip it and say so, and `run` cuts it before it appends (store.scan_results);
- a torn line with a whole record glued to it (two writers at once, before runs were locked)
  has our layout at its start and end: the cheap check also looks for a second record's start
  in it, which no record holds (JSON escapes every quote inside a string), so every verb,
  `run` included, names it by a full parse.

snapshot.py hands a checked file to polars.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars is for readers: the run path never imports it
    import polars as pl

import orjson

from orchestrator.errors import UserError

RESULTS = "results.ndjson"
REJECTED = "results.rejected.ndjson"
_PREFIX = b'{"taskId":"'
_ID_START = len(_PREFIX)
_ID_END = _ID_START + 32
_STATUS_KEY = b'","status":"'
_STATUS_AT = _ID_END + len(_STATUS_KEY)
_MODEL_KEY = b'","modelKey":"'
_SCORES = b'"scores":[{'  # a scored record's options, in the writer's compact JSON
_SHOWN = 5  # bad lines named in a message; the rest are counted
_BUFFER = 1 << 20


def json_fields(line: bytes) -> tuple[str, str, str] | None:
    """(taskId, status, modelKey) of any other complete line that is one of our records."""
    if not line.endswith(b"\n"):
        return None
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if (
        isinstance(rec, dict)
        and isinstance(rec.get("taskId"), str)
        and isinstance(rec.get("status"), str)
        and isinstance(rec.get("modelKey", ""), str)
    ):
        return rec["taskId"], rec["status"], rec.get("modelKey", "")
    return None


def why_not(line: bytes) -> str:
    """What a line that is not a record is, worded for a message."""
    if not line.endswith(b"\n"):
        return "a torn last line (no newline)"
    if not line.strip():
        return "a blank line"
    if line.startswith(b"\xef\xbb\xbf"):
        return "starts with a UTF-8 byte-order mark (BOM)"
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "not JSON (garbage, or parts of two lines)"
    if not isinstance(value, dict):
        return f"JSON but not an object ({type(value).__name__})"
    missing = [k for k in ("taskId", "status") if not isinstance(value.get(k), str)]
    if missing:
        return f"JSON without {' and '.join(missing)}: not a result record"
    return "JSON with a modelKey that is not a string"


def check_results_path(path: Path) -> None:
    if path.is_symlink():  # a run writes only into its own folder, never where a link points
        raise UserError(
            f"{path.name} is a symbolic link: a run reads and writes its results only in its "
            "own folder",
            file=path,
            fix="replace the link by the file it points to (or remove it), then run again",
        )
    if path.exists() and not path.is_file():
        raise UserError(
            f"{path.name} is a folder (or another non-file), not the results file",
            file=path,
            fix=f"move it out of {path.parent}: results.ndjson is "
            "written by 'orchestrator run' only",
        )


@dataclass
class ResultLines:
    """One pass over a results file. Iterate `records()` (or call `scan()`) to the end, then
    `check()`: whether the file was clean is only known after its last line."""

    path: Path
    data: bytes | None = None  # read these (lines of `path` held in memory), not the file
    first_line: int = 0  # the lines of `path` before `data`: line numbers count on from them
    bad: list[tuple[int, str]] = field(default_factory=list)  # the first few: (line number, why)
    bad_count: int = 0
    torn_bytes: int = 0  # a last line without a newline, skipped
    complete_bytes: int = 0  # the size of the lines before it, read
    lines: int = 0  # complete record lines read

    def _open(self):
        if self.data is not None:
            return io.BytesIO(self.data)
        check_results_path(self.path)
        return open(self.path, "rb", buffering=_BUFFER) if self.path.exists() else None

    def records(self) -> Iterator[tuple[str, str, str, int, bytes]]:
        """(taskId, status, modelKey, byte offset, line) of every record line, in file order.
        Our layout is read by position: a fixed start, the status up to its quote, then the
        modelKey. (Slices, not startswith/endswith, and locals, not attributes: resume reads a
        million lines here, and those cost twice as much.)"""
        f = self._open()
        if f is None:
            return
        offset = count = 0
        with f:
            for number, line in enumerate(f, self.first_line + 1):
                if (
                    line[:_ID_START] == _PREFIX
                    and line[_ID_END:_STATUS_AT] == _STATUS_KEY
                    and line[-2:] == b"}\n"
                    and line.find(_PREFIX, _ID_START) == -1  # not two records glued
                ):
                    end = line.find(b'"', _STATUS_AT)
                    k = end + len(_MODEL_KEY)
                    k_end = line.find(b'"', k) if line[end:k] == _MODEL_KEY else -1
                    if k_end != -1:
                        count += 1
                        yield (
                            line[_ID_START:_ID_END].decode(),
                            line[_STATUS_AT:end].decode(),
                            line[k:k_end].decode(),
                            offset,
                            line,
                        )
                        offset += len(line)
                        continue
                got = json_fields(line)
                if got is None:
                    self._reject(number, line)
                else:
                    count += 1
                    yield (*got, offset, line)
                offset += len(line)
        self.lines += count
        self.complete_bytes = offset - self.torn_bytes

    def finished(
        self, keep_failed: Collection[str] = ()
    ) -> tuple[set[str], Counter, dict[str, bytes]]:
        """What resume needs, in one pass: the tasks with a terminal record, their count per
        model key, and the last `failed` line holding option scores of each task of the
        `keep_failed` model keys (a later failed attempt holds those before it reused).
        The same checks as records(), written out in one loop: a million lines are read here
        at every resume, and the generator's tuples, a line counter and decoding each model
        key cost as much as the glued-record check does (which this keeps)."""
        done: set[str] = set()
        by_key: dict[bytes, int] = {}
        failed: dict[str, bytes] = {}
        keep = {k.encode() for k in keep_failed}
        f = self._open()
        if f is None:
            return done, Counter(), failed
        count = 0
        with f:
            for line in f:
                if (
                    line[:_ID_START] == _PREFIX
                    and line[_ID_END:_STATUS_AT] == _STATUS_KEY
                    and line[-2:] == b"}\n"
                    and line.find(_PREFIX, _ID_START) == -1  # not two records glued
                ):
                    end = line.find(b'"', _STATUS_AT)
                    k = end + len(_MODEL_KEY)
                    k_end = line.find(b'"', k) if line[end:k] == _MODEL_KEY else -1
                    if k_end != -1:
                        count += 1
                        if line[_STATUS_AT:end] != b"failed":
                            task_id = line[_ID_START:_ID_END].decode()
                            if task_id not in done:
                                done.add(task_id)
                                key = line[k:k_end]
                                by_key[key] = by_key.get(key, 0) + 1
                        elif keep and line[k:k_end] in keep and _SCORES in line:
                            failed[line[_ID_START:_ID_END].decode()] = line
                        continue
                got = json_fields(line)
                if got is None:  # its number: the lines before it are records or rejected
                    self._reject(self.first_line + count + self.bad_count + 1, line)
                    continue
                count += 1
                task_id, status, model_key = got
                if status != "failed":
                    if task_id not in done:
                        done.add(task_id)
                        key = model_key.encode()
                        by_key[key] = by_key.get(key, 0) + 1
                elif model_key in keep_failed and _SCORES in line:
                    failed[task_id] = line
            size = f.tell()
        self.lines += count
        self.complete_bytes = size - self.torn_bytes
        for task_id in done.intersection(failed):
            del failed[task_id]
        return done, Counter({k.decode(): n for k, n in by_key.items()}), failed

    def scan(self) -> ResultLines:
        """Only check every line (and count them), then check(): for readers that hand the file
        to a full parser afterwards, as analysis and status do to polars. Its check is the start
        of our layout only: a line that passes it and still is not JSON fails that parser, and
        `unparsable()` then names it."""
        f = self._open()
        if f is not None:
            with f:
                size = 0
                for number, line in enumerate(f, self.first_line + 1):
                    size += len(line)
                    if (
                        line[:_ID_START] != _PREFIX
                        or line[_ID_END:_STATUS_AT] != _STATUS_KEY
                        or line[-2:] != b"}\n"
                        or line.find(_PREFIX, _ID_START) != -1
                    ) and json_fields(line) is None:
                        self._reject(number, line)
                    else:
                        self.lines += 1
                self.complete_bytes = size - self.torn_bytes
        self.check()
        return self

    def _reject(self, number: int, line: bytes) -> None:
        if not line.endswith(b"\n"):  # only the last line can lack one
            self.torn_bytes = len(line)
            return
        self.bad_count += 1
        if len(self.bad) < _SHOWN:
            self.bad.append((number, why_not(line)))

    def check(self) -> None:
        """Refuse a file with lines that are not records (a torn last line is not one of them)."""
        if self.bad_count:
            raise bad_lines_error(self.path, self.bad, self.bad_count)

    def note(self) -> str | None:
        """What a read-only verb says about a torn last line it skipped."""
        return torn_note(self.path, self.torn_bytes)


def torn_note(path: Path, nbytes: int) -> str | None:
    if not nbytes:
        return None
    return (
        f"ignored a torn last line of {path} ({nbytes} bytes, no newline: a write cut short, "
        "or one still being written); 'orchestrator run' cuts it and runs that task again"
    )


def torn_bytes(path: Path) -> int:
    """The length of a last line without a newline, read from the end of the file only."""
    return tail(path)[1] if path.is_file() else 0


def tail(path: Path) -> tuple[int, int]:
    """(size, bytes after its last newline) of a file, at one moment."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        back = min(size, 1 << 16)
        while back:
            f.seek(size - back)
            cut = f.read(back).rfind(b"\n")
            if cut != -1:
                return size, back - cut - 1
            if back == size:
                break
            back = min(size, back * 4)
        return size, size


def bad_lines_error(path: Path, bad: list[tuple[int, str]], count: int) -> UserError:
    named = ", ".join(f"line {n} ({why})" for n, why in bad)
    more = f" and {count - len(bad):,} more" if count > len(bad) else ""
    what = "is not a result record" if count == 1 else f"are not result records ({count:,} lines)"
    return UserError(
        f"{named}{more} {what}",
        file=path,
        fix=f"run 'orchestrator repair {path.parent}': it moves such lines to "
        f"{REJECTED} beside it (nothing is deleted); then run this again",
    )


def unparsable(path: Path, data: bytes | None = None, first_line: int = 0) -> UserError | None:
    """After a full parser failed on a checked file (or on `data`, its lines after the first
    `first_line`): the lines a full JSON parse rejects (a record glued to a torn line), as an
    error to raise; None if there are none."""
    bad, count = [], 0
    source = io.BytesIO(data) if data is not None else open(path, "rb", buffering=_BUFFER)
    with source as f:
        for number, line in enumerate(f, first_line + 1):
            if line.endswith(b"\n") and json_fields(line) is None:
                count += 1
                if len(bad) < _SHOWN:
                    bad.append((number, why_not(line)))
    return bad_lines_error(path, bad, count) if count else None


def first_of_task(ids: str = "taskId") -> pl.Expr:
    """True on each task's first record among those it is applied to (as u64 hashes: a
    million task ids cost 8 MB)."""
    import polars as pl

    return pl.col(ids).hash().is_first_distinct()


def final_mask(df: pl.DataFrame, ids: str = "taskId") -> pl.Expr:
    """The one rule for which line of a results file is a task's final record, used by every
    reader (status, export, the viewer, analysis): its first terminal record, or else, for a
    task with none, its last `failed` one. Later terminal records of a task (two runs of one
    folder before the run lock could write them) are duplicates, counted once. `ids`: a
    column of task ids or of their hashes."""
    import polars as pl

    failed = pl.col("status") == "failed"
    task = pl.col(ids)
    # a failed record and a terminal one of the same task get different keys
    key = pl.when(failed).then(~task.hash()).otherwise(task.hash())
    retried = df.filter(failed)[ids]  # usually few; only these are looked up among the rest
    finished = df.filter(~failed & task.is_in(retried.implode()))[ids] if retried.len() else retried
    return (
        pl.when(failed)
        .then(key.is_last_distinct() & ~task.is_in(finished.implode()))
        .otherwise(key.is_first_distinct())
    )

"""Handing a checked results file to polars, which parses whole lines fast but stops at a
torn last line (without a line number) and cannot be told to read only part of a file.

So polars reads the file itself when its last line is complete, and else a temporary copy of
its complete lines; the run's own file is never changed. A run may append while a reader
reads (its flushes end mid-line): a parse that fails then is done again on a fresh copy.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import polars as pl

from orchestrator.engine.results import RESULTS, ResultLines, tail, torn_bytes, unparsable
from orchestrator.errors import UserError

T = TypeVar("T")
_BLOCK = 1 << 20


def parse_failure(path: Path) -> UserError | None:
    """Why a full parser (polars) failed on a checked results file, as an error to raise: the
    lines a full JSON parse rejects, or a last line torn since the check (a run is writing the
    file); None if neither explains it."""
    if (problem := unparsable(path)) is not None:
        return problem
    if torn_bytes(path):
        return UserError(
            "the results file changed while it was read: a run is appending to it",
            file=path,
            fix="run this again, or once the run is done",
        )
    return None


def parse_checked(lines: ResultLines, read: Callable[[Path], T]) -> T:
    """read(path) by a full parser of a file `lines` has checked: the file itself, or the lines
    before its torn last one. If a run appended a torn line since the check, read a snapshot
    of the complete lines instead; if a line is not JSON after all, name it."""
    try:
        source = Readable.of(lines)
        return read(source.path)
    except pl.exceptions.ComputeError:
        if (problem := unparsable(lines.path)) is not None:
            raise problem from None
    source = Readable.snapshot(lines.path)
    try:
        return read(source.path)
    except pl.exceptions.ComputeError:
        raise parse_failure(lines.path) or RuntimeError(
            f"polars cannot read {lines.path}"
        ) from None


def check_and_parse(path: Path, read: Callable[[Path], T]) -> tuple[ResultLines, T]:
    """Check every line of a results file (ResultLines.scan) and parse it with read (polars) at
    the same time: polars works outside the GIL, so the two share the cores. The parse is kept
    only if the check found the file clean and as it was when the parse began; else it is
    done again, after the check, by parse_checked."""
    size, torn = tail(path) if path.is_file() else (0, 0)
    source = Readable(path, size - torn if torn else None)
    with ThreadPoolExecutor(1) as pool:
        parsed = pool.submit(read, source.path)
        lines = ResultLines(path).scan()  # a bad line raises here (once the parse has ended)
        try:
            result = parsed.result()
        except pl.exceptions.ComputeError:
            result = None
    if result is None or lines.complete_bytes != size - torn:  # a run appended meanwhile
        result = parse_checked(lines, read)
    return lines, result


class Readable:
    """A path a full parser (polars) can read: the results file itself, or, when its last line
    is torn (a crash, or a run writing it right now), a temporary copy of its first `size`
    bytes, the complete lines: the run's own file is never changed. The copy lives as long as
    this object."""

    def __init__(self, path: Path, size: int | None = None) -> None:
        self._tmp = None
        self.path = path
        if size is not None:
            self._tmp = tempfile.TemporaryDirectory(prefix="orchestrator-")
            self.path = Path(self._tmp.name) / RESULTS
            _copy_head(path, self.path, size)

    @classmethod
    def of(cls, lines: ResultLines) -> Readable:
        """For a file just checked: itself, or its lines before a torn last one."""
        return cls(lines.path, lines.complete_bytes if lines.torn_bytes else None)

    @classmethod
    def snapshot(cls, path: Path) -> Readable:
        """A copy of the complete lines as they are now (of a file that a run is appending to)."""
        size, torn = tail(path)
        return cls(path, size - torn)


def _copy_head(src: Path, dst: Path, nbytes: int) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        left = nbytes
        try:
            while left > 0:  # in the kernel, without passing through Python
                sent = os.copy_file_range(fin.fileno(), fout.fileno(), left)
                if sent == 0:
                    break
                left -= sent
        except (AttributeError, OSError):  # no copy_file_range here: copy by blocks
            fin.seek(nbytes - left)
            fout.seek(nbytes - left)
            while left > 0:
                block = fin.read(min(left, _BLOCK))
                if not block:
                    break
                fout.write(block)
                left -= len(block)

"""The results as columns: a Parquet snapshot of every record line beside the NDJSON log, so that
a reader of a million records reads the few columns it needs in a fraction of a second instead
of parsing 750 MB of JSON each time.

NDJSON stays the log: crash-safe, append-only, the one truth. The snapshot is a cache of it,
in `results.snapshot/`: Parquet parts of the lines in file order, and `snapshot.json` saying
which prefix of the log they cover, by its length in bytes and lines and an xxh3 hash of those
bytes. A reader (`records()`):

- hashes the log's first `offset` bytes: the same hash, and the parts are that prefix as
  columns; another (a repaired, replaced or cut log) or a snapshot of another format, and the
  snapshot is rebuilt from the whole log. A process that reads the log again (the viewer of a
  live run) hashes only what it had not hashed before (prefix.py);
- checks and parses only the complete lines appended since (a torn last line is left out and
  said so, as every reader does), and appends them as a new part when they are many;
- never writes anything else, and a snapshot that cannot be written (a read-only folder, a full
  disk) is not an error: the reader goes on with what it read.

A run folder may come from someone else, so a snapshot is used only when it is provably this
user's tool's work on this log: its meta is sealed with the user's key (engine/seal.py), an HMAC
over the meta and each part's sha256, and each part must be a plain part name with the row
count and schema the meta says. Anything else (an edited part, another run's, a link, a meta
of the wrong shape) means a rebuild from the log, never a traceback, and `results.snapshot`
as a link is neither read nor written through.

Every record line is kept, not only final ones, so that the one rule for a task's final record
(results.final_mask) stays in one place and spend and retries still count every attempt. A part
is written to a unique name and renamed, then the meta file replaced whole: a kill -9 at any
moment leaves the old snapshot or the new one, never a mix. Answers are kept to their first
RAW_CHARS characters (lists and search need no more); a whole record is read from the log at
its `offset`.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import polars as pl
import xxhash

from orchestrator.engine.files import folder_within, read_regular, remove_file, write_file
from orchestrator.engine.names import SNAPSHOT_PART
from orchestrator.engine.prefix import prefix_digest, prefix_hash, read_range, remember
from orchestrator.engine.results import (
    ResultLines,
    check_results_path,
    final_mask,
    tail,
    torn_note,
    unparsable,
)
from orchestrator.engine.seal import file_digest, seal, sealed
from orchestrator.engine.snapshot import check_and_parse

if TYPE_CHECKING:
    import numpy as np

FOLDER = "results.snapshot"
META = "snapshot.json"
RAW_CHARS = 4096  # what of an answer the snapshot keeps
PART_LINES = 5_000  # fewer new lines than this are parsed each time, not written as a part
MAX_PARTS = 8  # more, and the next write compacts them into one
MAX_DELTA_BYTES = 256 << 20  # more appended than this, and the log is read whole (bounded memory)
GRACE_S = 120.0  # a part no meta names is deleted only this long after it was written: a reader
# that took it from the meta before stays able to read it

SCORE = pl.Struct(
    {
        "option": pl.String,
        "role": pl.String,
        "logp": pl.Float64,
        "premise": pl.Float64,
        "pmi": pl.Float64,
    }
)
# Every column a reader of records uses (status, analysis, the studies, the viewer, nightly).
SCHEMA: dict[str, pl.DataType] = {
    "taskId": pl.String(),
    "status": pl.String(),
    "modelKey": pl.String(),
    "experimentSlug": pl.String(),
    "conditionIndex": pl.Int64(),
    "sample": pl.Int64(),
    "model": pl.Struct({"provider": pl.String, "name": pl.String, "version": pl.String}),
    "response": pl.Struct(
        {
            "value": pl.Float64,
            "choice": pl.String,
            "role": pl.String,
            "mode": pl.String,
            "raw": pl.String,
            "scores": pl.List(SCORE),
        }
    ),
    "job": pl.String(),
    "variant": pl.String(),
    "strategy": pl.String(),
    "optionOrder": pl.List(pl.String),
    "attempts": pl.Int64(),
    "latencyMs": pl.Float64(),
    "costUsd": pl.Float64(),
    "usage": pl.Struct(
        {"prompt_tokens": pl.Int64, "completion_tokens": pl.Int64, "reasoning_tokens": pl.Int64}
    ),
    "servedModel": pl.String(),
    "systemFingerprint": pl.String(),
    "finishedAt": pl.String(),
}
# bumped when SCHEMA or what a part holds changes: an older snapshot is rebuilt (2: sealed;
# 3: token usage, for the Python API's lazy results)
FORMAT = 3
MAX_PART_BYTES = 16 << 30  # a part is read only up to this size (a 1M-record run's is ~60 MB)


@dataclass
class Records:
    """Every record line of a results file as a lazy frame (SCHEMA and `offset`, the line's
    byte offset in the log), in file order."""

    frame: pl.LazyFrame
    lines: int  # record lines read
    complete_bytes: int  # the log's bytes they are: its lines before a torn last one
    torn_bytes: int
    path: Path
    whole: bool = False  # parsed from the whole log: the snapshot was missing or out of date
    identity: tuple[int, ...] = ()  # the log file read (device, inode)
    parts: tuple[pl.LazyFrame, ...] = ()  # what `frame` is the union of, in file order

    def pieces(self) -> tuple[pl.LazyFrame, ...]:
        """The frame as the frames it joins (the snapshot's parts, the lines parsed since): a
        reader that takes rows a slice at a time slices each (a slice of their union would
        read every part for every slice)."""
        return self.parts or (self.frame,)

    def note(self) -> str | None:
        return torn_note(self.path, self.torn_bytes)


def records(path: Path, again: bool = False) -> Records:
    """The results file `path` as columns, through its snapshot (brought up to date, or rebuilt,
    and written back where it can be). A line that is not a record raises the error naming it,
    as every reader does. `again`: the caller reads this log over and over (the viewer of a
    live run), so what this process hashed of it before is not hashed again (prefix.py)."""
    check_results_path(path)
    if not path.is_file() or path.stat().st_size == 0:
        ResultLines(path).scan()
        return Records(_empty(), 0, 0, 0, path)
    folder = path.parent / FOLDER
    identity = _identity(path)
    size, torn = tail(path)
    complete = size - torn
    found = _current(path, folder, complete, identity, again)
    if found is None or complete - found[0]["offset"] > MAX_DELTA_BYTES:  # read whole
        lines, df = check_and_parse(path, _parse)
        df = df.head(lines.lines)  # lines a run appended after the check are not covered
        complete, torn = lines.complete_bytes, lines.torn_bytes
        df = df.with_columns(offset=pl.Series(_starts(path, 0, complete), dtype=pl.UInt64))
        if _identity(path) == identity:  # not replaced (repaired) while it was read
            digest = prefix_hash(path, complete)
            if again:
                remember(path, identity, complete, digest)
            _save(folder, [], df, complete, lines.lines, digest.hexdigest(), identity)
        return Records(
            df.lazy(), lines.lines, complete, torn, path, whole=True, identity=tuple(identity)
        )
    meta, digest = found
    parts = [folder / part["name"] for part in meta["parts"]]
    start, first_line = meta["offset"], meta["lines"]
    base = pl.scan_parquet(parts) if parts else _empty()
    if complete == start:
        return Records(base, first_line, complete, torn, path, identity=tuple(identity))
    data = read_range(path, start, complete)
    lines = ResultLines(path, data=data, first_line=first_line).scan()
    new = _parse_bytes(path, data, first_line)
    new = new.with_columns(offset=pl.Series(_starts_of(data, start), dtype=pl.UInt64))
    total = first_line + lines.lines
    if lines.lines >= PART_LINES:
        digest.update(data)  # the hash of exactly the bytes these rows were parsed from
        if again:
            remember(path, identity, complete, digest)
        names = _save(folder, meta["parts"], new, complete, total, digest.hexdigest(), identity)
        if names is not None:
            parts = [folder / name for name in names]
            return Records(
                pl.scan_parquet(parts), total, complete, torn, path, identity=tuple(identity)
            )
    return Records(
        pl.concat([base, new.lazy()]),
        total,
        complete,
        torn,
        path,
        parts=(base, new.lazy()),
        identity=tuple(identity),
    )


def final_rows(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    """Each task's final record line (results.final_mask) of the results file `path`, as the
    snapshot's columns (those given, with what the rule needs), in the log's order."""
    frame = records(path).frame
    if columns is not None:
        frame = frame.select(list(dict.fromkeys(["taskId", "status", *columns])))
    lines = frame.collect()
    return lines.filter(final_mask(lines))


def lines_at(path: Path, offsets: Iterable[int]) -> Iterator[bytes]:
    """The whole record lines that start at these byte offsets of the log (final_rows' `offset`),
    memory-mapped: for the fields the snapshot keeps only the start of."""
    import mmap

    from orchestrator.errors import UserError

    offsets = list(offsets)
    if not offsets:  # an empty log cannot be mapped
        return
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for at in offsets:
            end = data.find(b"\n", at)  # a record line is complete: it ends in one
            if end < 0:  # the log was replaced or cut since its rows were read
                raise UserError(
                    "the results file changed while it was read",
                    file=path,
                    fix="read it again once the run that writes it has stopped",
                )
            yield data[at:end]


def _parse(path: Path) -> pl.DataFrame:
    return _trim(pl.scan_ndjson(path, schema=SCHEMA, ignore_errors=True)).collect()


def _parse_bytes(path: Path, data: bytes, first_line: int) -> pl.DataFrame:
    import io

    try:
        frame = pl.read_ndjson(io.BytesIO(data), schema=SCHEMA, ignore_errors=True)
        return _trim(frame.lazy()).collect()
    except pl.exceptions.ComputeError:
        problem = unparsable(path, data, first_line)
        raise problem or RuntimeError(f"polars cannot read {path}") from None


def _trim(lf: pl.LazyFrame) -> pl.LazyFrame:
    raw = pl.field("raw").str.slice(0, RAW_CHARS)
    return lf.with_columns(pl.col("response").struct.with_fields(raw))


def _empty() -> pl.LazyFrame:
    return pl.LazyFrame(schema={**SCHEMA, "offset": pl.UInt64})


def _starts_of(data: bytes, at: int) -> np.ndarray:
    """The byte offsets of the lines in `data`, which starts at `at` in the log."""
    import numpy as np  # here: `status` of a current snapshot needs none (0.06 s to import)

    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    return np.concatenate([[0], ends[:-1] + 1]).astype(np.uint64) + at


def _starts(path: Path, start: int, end: int) -> np.ndarray:
    """The byte offsets of the lines in path[start:end], read in blocks (bounded memory)."""
    import numpy as np

    found, block, at = [np.zeros(1, dtype=np.int64) + start], 1 << 26, start
    with open(path, "rb") as f:
        f.seek(start)
        while at < end:
            buf = np.frombuffer(f.read(min(block, end - at)), dtype=np.uint8)
            found.append(np.flatnonzero(buf == 10).astype(np.int64) + at + 1)
            at += len(buf)
    return np.concatenate(found)[:-1].astype(np.uint64)  # the last newline starts no line


def _identity(path: Path) -> list[int]:
    """The log file itself (device, inode): `repair` and a replaced log make another one."""
    st = path.stat()
    return [st.st_dev, st.st_ino]


def _meta(folder: Path) -> dict | None:
    if folder.is_symlink():  # never read through a link a received folder holds
        return None
    data = read_regular(folder / META, 1 << 20)  # not through a link, nor from a FIFO
    try:
        meta = orjson.loads(data) if data is not None else None
    except orjson.JSONDecodeError:
        return None
    return meta if isinstance(meta, dict) else None


def _sealed_bytes(meta: dict) -> bytes:
    return orjson.dumps({k: v for k, v in meta.items() if k != "seal"}, option=orjson.OPT_SORT_KEYS)


def _well_formed(meta: dict, complete: int, identity: list[int]) -> bool:
    """The meta's shape, and that it is about this log as it is (the same file, no longer)."""
    parts = meta.get("parts")
    return (
        meta.get("format") == FORMAT
        and meta.get("identity") == identity
        and _count(meta.get("offset"))
        and meta["offset"] <= complete
        and _count(meta.get("lines"))
        and isinstance(meta.get("hash"), str)
        and isinstance(parts, list)
        and len(parts) <= MAX_PARTS
        and all(
            isinstance(p, dict)
            and isinstance(p.get("name"), str)
            and SNAPSHOT_PART.fullmatch(p["name"]) is not None
            and _count(p.get("rows"))
            and isinstance(p.get("sha256"), str)
            for p in parts
        )
        and sum(p["rows"] for p in parts) == meta["lines"]
    )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _part_is(path: Path, part: dict) -> bool:
    """The part file is the one sealed (its sha256), with the rows and columns it says."""
    if file_digest(path, MAX_PART_BYTES) != part["sha256"]:
        return False
    schema = pl.read_parquet_schema(path)
    rows = pl.scan_parquet(path).select(pl.len()).collect().item()  # from the file's footer
    return rows == part["rows"] and schema == {**SCHEMA, "offset": pl.UInt64()}


def _current(
    path: Path, folder: Path, complete: int, identity: list[int], again: bool
) -> tuple[dict, xxhash.xxh3_64] | None:
    """The snapshot's meta and the digest of the prefix it covers, if it is sealed by this user
    and its parts are a prefix of the log as it is now (the same file, the same bytes, parts
    that are the ones sealed); else None."""
    meta = _meta(folder)
    try:
        if (
            meta is None
            or not _well_formed(meta, complete, identity)
            or not sealed(meta.get("seal"), _sealed_bytes(meta))
            or not all(_part_is(folder / p["name"], p) for p in meta["parts"])
        ):
            return None
        if again:
            digest = prefix_digest(path, meta["offset"], identity)
        else:
            digest = prefix_hash(path, meta["offset"])
    except Exception:  # noqa: BLE001 - a cache that cannot be read is rebuilt, never an error
        return None
    return (meta, digest) if digest.hexdigest() == meta["hash"] else None


def _save(
    folder: Path,
    parts: list[dict],
    new: pl.DataFrame,
    offset: int,
    lines: int,
    digest: str,
    identity: list[int],
) -> list[str] | None:
    """Write `new` as a part after `parts` (compacting them all into one when there are too
    many), then the sealed meta that names them, and the log prefix they are (its bytes, lines
    and hash, of the bytes they were parsed from): the parts' names; None if it cannot be
    written (a read-only folder, a full disk, a link, no seal key: only a cache is lost)."""
    try:
        if seal() is None:  # an unsealed snapshot would never be used
            return None
        folder_within(folder.parent, folder)  # made 0700; refused if it is a link
        if len(parts) + 1 > MAX_PARTS:
            whole = pl.concat([pl.scan_parquet([folder / p["name"] for p in parts]), new.lazy()])
            written = [_write_part(folder, whole.collect())]
        else:
            written = [*parts, _write_part(folder, new)]
        meta = {
            "format": FORMAT,
            "offset": offset,
            "lines": lines,
            "hash": digest,
            "identity": identity,
            "parts": written,
        }
        meta["seal"] = seal(_sealed_bytes(meta))
        write_file(folder / META, orjson.dumps(meta, option=orjson.OPT_INDENT_2))
        names = [p["name"] for p in written]
        _drop_stale(folder, names)
        return names
    except Exception:  # noqa: BLE001 - a cache: failing to write it never stops a reader
        return None


def _drop_stale(folder: Path, names: list[str]) -> None:
    """Parts no meta names any more, and temporary files a kill -9 left, once GRACE_S old."""
    now = time.time()
    for stale in [*folder.glob("part-*.parquet"), *folder.glob(".part-*.tmp")]:
        with contextlib.suppress(OSError):
            if stale.name not in names and now - stale.lstat().st_mtime > GRACE_S:
                remove_file(stale, within=folder)


def _write_part(folder: Path, df: pl.DataFrame) -> dict:
    """A new part (its name, rows and sha256, as the meta names it), written by the one writer."""
    name = f"part-{secrets.token_hex(6)}.parquet"
    path = write_file(
        folder / name,
        lambda f: df.write_parquet(f, compression="zstd", statistics=False),
        within=folder,
    )
    return {"name": name, "rows": df.height, "sha256": file_digest(path, MAX_PART_BYTES)}

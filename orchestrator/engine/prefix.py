"""The hash of a results log's prefix, which says whether the columnar snapshot still covers it,
and what this process already hashed of each log, so that the viewer of a live run, reading it
again every few seconds, reads only what was appended instead of the whole log each time.

A log changes under a snapshot in three ways: it is replaced (`repair`, a copy: another file,
another identity), cut (shorter than the prefix), or rewritten in place. The first two are seen
without reading. For the third, every command hashes the whole prefix (prefix_hash). The viewer
(prefix_digest) keeps the digest of the prefix it hashed and its first and last EDGE bytes: on
its next read it compares those bytes and hashes only what follows. A rewrite in place of bytes
between them, by another program while the viewer runs, goes unseen until the viewer is
started again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import xxhash

EDGE = 1 << 16  # bytes at each end of a known prefix compared again (a rewritten start or end)


def read_range(path: Path, start: int, end: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)


def prefix_hash(path: Path, nbytes: int) -> xxhash.xxh3_64:
    """xxh3-64 of the file's first `nbytes` bytes, read through one 4 MB buffer (~0.2 s a GB
    from the page cache; not mapped, so the reader's memory does not grow with the log): a
    digest that appended bytes can be added to."""
    digest = xxhash.xxh3_64()
    buffer = memoryview(bytearray(1 << 22))
    with open(path, "rb", buffering=0) as f:
        left = nbytes
        while left > 0:
            got = f.readinto(buffer[: min(left, len(buffer))])
            if not got:
                break
            digest.update(buffer[:got])
            left -= got
    return digest


@dataclass
class _Known:
    identity: list[int]
    offset: int
    digest: xxhash.xxh3_64  # of the first `offset` bytes
    edges: bytes  # its first and last EDGE bytes, as they were hashed


_KNOWN: dict[Path, _Known] = {}


def remember(path: Path, identity: list[int], nbytes: int, digest: xxhash.xxh3_64) -> None:
    """`digest` is the hash of the log's first `nbytes` bytes (as this process read them)."""
    _KNOWN[path.absolute()] = _Known(identity, nbytes, digest.copy(), edges(path, nbytes))


def edges(path: Path, nbytes: int) -> bytes:
    """The first and last EDGE bytes of the file's first `nbytes`."""
    return read_range(path, 0, min(EDGE, nbytes)) + read_range(path, max(0, nbytes - EDGE), nbytes)


def prefix_digest(path: Path, nbytes: int, identity: list[int]) -> xxhash.xxh3_64:
    """prefix_hash, from what this process hashed of the same file before when it can: then
    only the bytes after that prefix are hashed (and its first and last EDGE bytes compared).
    For a reader that reads one log again and again (the viewer), never for a command."""
    known = _KNOWN.get(path.absolute())
    if known is not None and known.identity == identity and known.offset <= nbytes:
        if edges(path, known.offset) == known.edges:
            digest = known.digest.copy()
            digest.update(read_range(path, known.offset, nbytes))
            if nbytes > known.offset:
                remember(path, identity, nbytes, digest)
            return digest
    digest = prefix_hash(path, nbytes)
    remember(path, identity, nbytes, digest)
    return digest

"""How a run folder's files are written: private to the user (0700 folders, 0600 files: a
manifest holds every prompt, results hold every answer), never through a symbolic link that
someone else placed, and replaced whole through a unique temporary file that is on disk before
it takes the name."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from orchestrator.errors import UserError

FOLDER_MODE, FILE_MODE = 0o700, 0o600


def private_folder(path: Path) -> Path:
    """The folder, made if need be (the parents too) with mode 0700 for what this call makes;
    an existing folder keeps its mode (the user may have shared it on purpose)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    for made in missing:  # mkdir's mode is masked by the umask; this is not
        with contextlib.suppress(OSError):
            os.chmod(made, FOLDER_MODE)
    return path


def open_append(path: Path, text: bool = False):
    """The file opened to append (made 0600 if new), refusing a symbolic link in its place;
    `text`: as UTF-8 text, a line at a time (a log)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(
                f"{path.name} is a symbolic link: a run writes its results only into its own "
                "folder",
                file=str(path),
                fix="replace the link by the file it points to (or remove it), then run again",
            ) from None
        raise
    if text:
        return os.fdopen(fd, "a", encoding="utf-8", buffering=1)
    return os.fdopen(fd, "ab")


def replace_whole(path: Path, data: bytes) -> None:
    """The file's content is `data`, or what it was: a unique temporary file beside it (made
    exclusively, 0600), flushed to disk, then renamed over it, and the rename made durable."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    sync_folder(path.parent)


def sync_folder(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be synced
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

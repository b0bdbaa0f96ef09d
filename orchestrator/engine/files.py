"""How a run folder's files are written: private to the user (0700 folders, 0600 files: a
manifest holds every prompt, results hold every answer), never through a symbolic link, and
replaced whole through a unique temporary file that is on disk before it takes the name.

A run folder may come from someone else (a shared disk, a colleague's tarball), holding links
placed at the names this tool writes. So `write_file`, the one writer of whole files, takes the
folder it must stay in: the path must lie inside it, no folder between the two may be a link,
and the file's own name is replaced, never followed. The one rule for modes: whatever this tool
writes is 0600, in folders it makes 0700; a folder that exists keeps its mode (the user may have
shared it on purpose).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from orchestrator.errors import UserError

FOLDER_MODE, FILE_MODE = 0o700, 0o600
_LINK_FIX = "remove the link (a run folder from someone else may hold one), then run again"


def private_folder(path: Path) -> Path:
    """The folder, made if need be (the parents too) with mode 0700 for what this call makes;
    an existing folder keeps its mode (the user may have shared it on purpose)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    for made in missing:  # mkdir's mode is masked by the umask; this is not
        with contextlib.suppress(OSError):
            os.chmod(made, FOLDER_MODE)
    return path


def folder_within(root: Path, path: Path, make: bool = True) -> Path:
    """The folder `path`, made (0700) where missing, after checking that it lies inside `root`
    (the run folder, or a folder the user named) and that neither it nor a folder between the
    two is a symbolic link or a file. `root` itself is the user's choice and is not checked.
    `make=False`: only the check, of the folders that exist (nothing is written)."""
    base = Path(os.path.abspath(root))
    target = Path(os.path.abspath(path))  # `..` resolved by the text, never by following links
    if not target.is_relative_to(base):
        raise UserError(
            f"{path} lies outside {root}: this tool writes a run's files only inside its folder",
            file=path,
            fix="give a folder inside the run folder, or one of your own with --out",
        )
    if make and not base.is_dir():
        private_folder(base)
    at = base
    for part in target.relative_to(base).parts:
        at = at / part
        try:
            mode = os.lstat(at).st_mode
        except FileNotFoundError:
            if not make:
                break
            with contextlib.suppress(FileExistsError):
                os.mkdir(at, FOLDER_MODE)
                os.chmod(at, FOLDER_MODE)  # mkdir's mode is masked by the umask
            mode = os.lstat(at).st_mode
        if stat.S_ISLNK(mode):
            raise UserError(
                f"{at} is a symbolic link: this tool never writes through one",
                file=str(at),
                fix=_LINK_FIX,
            )
        if not stat.S_ISDIR(mode):
            raise UserError(f"{at} is not a folder", file=str(at), fix=f"remove or rename {at}")
    return target


def write_file(
    path: Path, data: bytes | Callable[[BinaryIO], object], within: Path | None = None
) -> Path:
    """The file's content is `data` (or what `data(file)` writes), or what it was: a unique
    temporary file beside it (made exclusively, 0600, never through a link), flushed to disk,
    renamed over it (a link at its name is replaced, not followed), and the rename made
    durable. `within`: the folder the file must stay in (folder_within); default its own."""
    folder = folder_within(path.parent if within is None else within, path.parent)
    tmp = folder / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes | bytearray | memoryview):
                f.write(data)
            else:
                data(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / path.name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    sync_folder(folder)
    return folder / path.name


def replace_whole(path: Path, data: bytes) -> None:
    """write_file in the file's own folder (kept for the manifest's and the exports' callers)."""
    write_file(path, data)


def remove_file(path: Path, within: Path) -> None:
    """Delete the file `path` (a link at its name is removed, never its target), refusing a
    folder on the way that is a link or lies outside `within`. Missing already is fine."""
    folder = folder_within(within, path.parent)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(folder / path.name)  # the path checked, not the one given


def read_regular(path: Path, limit: int) -> bytes | None:
    """At most `limit` bytes of a regular file, never through a link nor from a FIFO or a device
    (which would block, or never end): a run folder's small files (a seal, a snapshot's meta)
    as read from a folder that may be someone else's. None if it is not such a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(limit)


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
                file=path,
                fix="replace the link by the file it points to (or remove it), then run again",
            ) from None
        raise
    if text:
        return os.fdopen(fd, "a", encoding="utf-8", buffering=1)
    return os.fdopen(fd, "ab")


def sync_folder(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be synced
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

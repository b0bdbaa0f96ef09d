"""One process owns a run folder: an exclusive `flock` on `<run>/.lock`.

The kernel drops a flock when its holder dies, kill -9 included, so a lock can never be left
stale: the file may stay behind, but nobody holds it. The holder writes who it is (pid, host,
start time) into the file so that a refused second run can name it.
"""
from __future__ import annotations

import fcntl
import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson

from orchestrator.errors import UserError

LOCK = ".lock"
POLL_S = 0.2  # how often --wait tries again (a blocking flock would not see Ctrl-C promptly)


class RunLockedError(UserError):
    """Another process holds the run."""


class RunLock:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK
        self._fd: int | None = None

    def holder(self) -> str:
        """Who holds the lock, as the holder wrote it (best effort: it may be mid-write)."""
        try:
            info = orjson.loads(self.path.read_bytes())
            return f"pid {info['pid']} on {info['host']}, started {info['since']}"
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
            return "another process"

    def acquire(self, wait: bool = False, on_wait=None) -> None:
        """Take the lock, or raise RunLockedError naming the holder; with `wait`, wait for it
        (calling `on_wait(holder)` once first)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UserError(f"cannot open the run's lock file: {exc.strerror}", file=str(self.path),
                            fix="make the run folder writable (a run writes its results there)") from None
        try:
            told = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if not isinstance(exc, BlockingIOError):
                        raise UserError(f"cannot lock the run folder: {exc.strerror}",
                                        file=str(self.path.parent),
                                        fix="keep runs on a local file system that supports flock") from None
                    if not wait:
                        raise RunLockedError(
                            f"this run is in use by {self.holder()}", file=str(self.path.parent),
                            fix="wait for that run to finish (or stop it), or add --wait to "
                                "start as soon as it ends") from None
                    if not told and on_wait is not None:
                        on_wait(self.holder())
                        told = True
                    time.sleep(POLL_S)
        except BaseException:
            os.close(fd)
            raise
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(me), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # the file stays: unlinking a flocked file races
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

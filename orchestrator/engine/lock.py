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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise UserError(
                f"cannot open the run's lock file: {exc.strerror}",
                file=str(self.path),
                fix="make the run folder writable (a run writes its results there)",
            ) from None
        try:
            told = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if not isinstance(exc, BlockingIOError):
                        raise UserError(
                            f"cannot lock the run folder: {exc.strerror}",
                            file=str(self.path.parent),
                            fix="keep runs on a local file system that supports flock",
                        ) from None
                    if not wait:
                        raise RunLockedError(
                            f"this run is in use by {self.holder()}",
                            file=str(self.path.parent),
                            fix="wait for that run to finish (or stop it), or add --wait to "
                            "start as soon as it ends",
                        ) from None
                    if not told and on_wait is not None:
                        on_wait(self.holder())
                        told = True
                    time.sleep(POLL_S)
        except BaseException:
            os.close(fd)
            raise
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
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


# Who holds a run, read from the lock file alone: taking even a shared flock to find out
# could make a `run` starting at that instant refuse with "in use".
_CLOCK_SLACK_S = 2  # the lock's time is to the second, the kernel's boot time too


def _process_start(pid: int) -> float | None:
    """When a process started (Unix time), from /proc; None where there is no /proc."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _alive(pid: int, since: Any) -> bool:
    """Whether the lock's writer still lives: a process with its pid that started before the
    lock was taken. After a reboot, or in a new container, a dead run's pid is often some other
    process's, started later."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        pass  # another user's process: it exists
    start = _process_start(pid)
    try:
        taken = datetime.fromisoformat(since).timestamp()
    except (TypeError, ValueError):
        return True
    return start is None or start <= taken + _CLOCK_SLACK_S


def lock_state(run_dir: Path) -> str | None:
    """'running (pid, host)', 'locked (pid, host)' (another host: not checkable from here),
    'interrupted' (its holder died without releasing it), or None (nobody holds the run)."""
    try:
        info = orjson.loads((run_dir / LOCK).read_bytes())
        pid, host = info["pid"], info["host"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None  # no lock, an emptied one, or one mid-write (its holder truncates, then writes)
    if not isinstance(pid, int) or pid <= 0:  # os.kill(0 or -1) would signal whole groups
        return None
    if host != socket.gethostname():
        return f"locked (pid {pid}, {host})"
    return f"running (pid {pid}, {host})" if _alive(pid, info.get("since")) else "interrupted"

"""Child processes this tool starts (llama.cpp servers, the run's own Ray cluster): a free port
for them, their death with ours, and their stop."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_process(proc: subprocess.Popen | None, grace_s: float) -> None:
    """SIGTERM, and SIGKILL if it has not ended within `grace_s`."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]

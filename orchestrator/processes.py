"""Child processes this tool starts (llama.cpp servers, the run's own Ray cluster): a free port
for them, their death with ours, and their stop."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterable, Mapping

_PR_SET_PDEATHSIG = 1

# What a child of this tool inherits of its environment: what a program needs to find itself,
# its libraries and its locale, and the numeric libraries' settings (some processors need
# OPENBLAS_CORETYPE to compute right). Nothing else: not HOST, PORT or CONFIG_FILE, which
# llama-cpp-python's server reads ahead of its arguments (HOST=0.0.0.0 would open it to the
# network), and no API key of any provider.
_INHERITED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM",
        "TMPDIR", "TEMP", "TMP", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
    }
)  # fmt: skip
_INHERITED_PREFIXES = re.compile(r"^(?:LC_|XDG_|OPENBLAS_|OMP_|MKL_|GOTO|GGML_)")


def child_env(
    extra: Mapping[str, str] | None = None,
    keep: Iterable[str] = (),
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A child's environment: the allow-listed variables of ours, the ones named in `keep`
    (those of ours that start so, e.g. "RAY_"), and `extra` over them."""
    env = os.environ if source is None else source
    prefixes = tuple(keep)
    out = {
        name: value
        for name, value in env.items()
        if name in _INHERITED or _INHERITED_PREFIXES.match(name) or name.startswith(prefixes)
    }
    return {**out, **(extra or {})}


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

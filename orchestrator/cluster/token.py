"""The token that Ray's token authentication needs on the run's own cluster.

The run's own cluster starts with RAY_AUTH_MODE=token (see head.py), and `ray start` then
refuses to start without a token: it never makes one itself. So, as `ray get-auth-token
--generate` would, the run makes one where Ray looks for it when the user has none, and says so.
Ray looks, in this order, at RAY_AUTH_TOKEN, at the file RAY_AUTH_TOKEN_PATH names, and at
$HOME/.ray/auth_token (docs.ray.io, "Ray token authentication"), and reads a file's first line,
trimmed. A file the user has is never replaced; a cluster we only join keeps its own token,
so nothing is made for it.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path

from orchestrator.errors import UserError

FIX = (
    "give Ray the cluster's token: set RAY_AUTH_TOKEN, or RAY_AUTH_TOKEN_PATH to a file "
    "holding it, or put it in ~/.ray/auth_token (`ray get-auth-token` on the head prints it; "
    "`ray get-auth-token --generate` makes one for a cluster of this machine)"
)


def default_path() -> Path:
    """Ray's own place for the token: its C++ loader takes $HOME, or the current folder
    when HOME is unset (so not Path.home(), which would ask the password database)."""
    return (Path(os.environ.get("HOME") or ".") / ".ray" / "auth_token").absolute()


def ensure_token(say: Callable[[str], None]) -> Path | None:
    """Make sure Ray finds a token, creating $HOME/.ray/auth_token (readable by this user
    alone) when the user has none. Returns the token's file (None when RAY_AUTH_TOKEN holds
    it), for the caller to name in RAY_AUTH_TOKEN_PATH so that Ray reads exactly that file. An
    unusable token the user has is an error, never replaced."""
    if "RAY_AUTH_TOKEN" in os.environ:
        if not os.environ["RAY_AUTH_TOKEN"].strip():
            raise UserError(
                "Ray's token authentication: RAY_AUTH_TOKEN is set but empty",
                field="models[].server",
                fix=FIX,
            )
        return None
    named = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if named:
        if not _read(Path(named)):
            raise UserError(
                f"Ray's token authentication: RAY_AUTH_TOKEN_PATH names {named}, "
                "which is missing or holds no token",
                field="models[].server",
                fix=FIX,
            )
        return Path(named).absolute()
    path = default_path()
    if not _read(path) and _create(path):
        say(
            f"Ray: no authentication token was found, so one was created in {path} (Ray's own "
            "place, readable by you alone), as `ray get-auth-token --generate` would"
        )
    return path


def _read(path: Path) -> str:
    """The token in a file as Ray reads it: its first line, trimmed ('' for none)."""
    try:
        with path.open() as f:
            return f.readline().strip()
    except (OSError, UnicodeDecodeError):  # missing, unreadable or a folder: no token there
        return ""


def _create(path: Path) -> bool:
    """A new token in `path`, unless another run made one meanwhile (runs take turns on a lock
    beside it); written whole before it appears. True when this call wrote it. A file that holds
    no token Ray can read is the user's: an error, not replaced."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(path.parent / ".auth_token.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _read(path):  # another run made it while this one waited
                return False
            if path.exists():
                raise UserError(
                    f"Ray's token authentication: {path} holds no token on its first line, "
                    "where Ray reads it",
                    field="models[].server",
                    fix="put the token on the file's first line, or delete the file for the run "
                    "to create a new token there",
                )
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".auth_token.new-")  # mode 0600
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))  # as Ray's own generator: 256 random bits
            os.replace(tmp, path)
            return True
    except OSError as exc:
        raise UserError(
            f"Ray's token authentication needs a token, and none could be created "
            f"in {path}: {exc.strerror or exc}",
            field="models[].server",
            fix=FIX,
        ) from None

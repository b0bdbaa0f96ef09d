"""The token that Ray's token authentication needs on the run's own cluster.

The run's own cluster starts with RAY_AUTH_MODE=token (see head.py), and `ray start` then
refuses to start without a token: it never makes one itself. So, as `ray get-auth-token
--generate` would, the run makes one where Ray looks for it when the user has none, and says so.
Ray looks, in this order, at RAY_AUTH_TOKEN, at the file RAY_AUTH_TOKEN_PATH names, and at
~/.ray/auth_token (docs.ray.io, "Ray token authentication"). A token the user gave is never
replaced; a cluster we only join keeps its own token, so nothing is made for it.
"""

from __future__ import annotations

import contextlib
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
    """Ray's own place for the token (ray._private.authentication: Path.home() / .ray)."""
    return Path.home() / ".ray" / "auth_token"


def ensure_token(say: Callable[[str], None]) -> None:
    """Make sure Ray finds a token, creating ~/.ray/auth_token (readable by this user alone)
    when the user has none; an unusable token the user named is an error, not replaced."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return
    named = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if named:
        if not _read(Path(named)):
            raise UserError(
                f"Ray's token authentication: RAY_AUTH_TOKEN_PATH names {named}, "
                "which is missing or empty",
                field="models[].server",
                fix=FIX,
            )
        return
    path = default_path()
    if _read(path):
        return
    _write_new(path)
    say(
        f"Ray: no authentication token was found, so one was created in {path} (Ray's own "
        "place, readable by you alone), as `ray get-auth-token --generate` would"
    )


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:  # missing, unreadable or a folder: no token there
        return ""


def _write_new(path: Path) -> None:
    """A new token, written whole before it appears: a second run making one at the same
    moment keeps the first (link fails on an existing file), an empty file is replaced."""
    tmp = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".auth_token.")  # mode 0600
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))  # what Ray's own generator makes: 256 random bits
        try:
            os.link(tmp, path)
        except FileExistsError:
            if not _read(path):  # an empty file (no token): replace it
                os.replace(tmp, path)
    except OSError as exc:
        raise UserError(
            f"Ray's token authentication needs a token, and none could be created "
            f"in {path}: {exc.strerror or exc}",
            field="models[].server",
            fix=FIX,
        ) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

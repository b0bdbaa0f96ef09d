"""The user's seal: a key of this user's, kept outside every run folder, that tells what this
user's tool wrote from what arrived with a folder made elsewhere.

A run folder may come from someone else. Its derived files (the columnar snapshot) are used
only when sealed by this key: an HMAC over what they hold, so a part edited, swapped in from
another run or made by another program is rebuilt from the log instead. Its manifest is
sealed too when this user's tool writes it, so that resuming a folder made elsewhere can ask
before a key goes to an endpoint that folder names (engine/endpoints.py).

The key is 32 random bytes in `$XDG_CONFIG_HOME/bias-orchestrator/seal.key` (else
~/.config/...), made 0600 on first use. Without it (a read-only home), nothing is sealed:
snapshots are rebuilt on each read and every folder counts as made elsewhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_BYTES = 32
_cached: dict[Path, bytes | None] = {}


def key_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "bias-orchestrator" / "seal.key"


def user_key() -> bytes | None:
    """This user's seal key, made on first use; None if it can be neither read nor made."""
    path = key_path()
    if path not in _cached:
        _cached[path] = _read(path) or _make(path)
    return _cached[path]


def _read(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        # another user's key, or one others may read, seals nothing of this user's
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None
        key = f.read(KEY_BYTES + 1)
    return key if len(key) == KEY_BYTES else None


def _make(path: Path) -> bytes | None:
    """A new key, written whole under a temporary name and linked into place: two processes
    making it at once end with the same key (the second link fails; it reads the first's)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".seal.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except OSError:
        return None
    return _read(path)


def seal(*parts: bytes) -> str | None:
    """The seal of these byte strings (in order), or None when this user has no key."""
    key = user_key()
    if key is None:
        return None
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))  # framed: ("ab", "c") is not ("a", "bc")
        mac.update(part)
    return mac.hexdigest()


def sealed(value: object, *parts: bytes) -> bool:
    """Whether `value` is the seal of these parts by this user's key."""
    expected = seal(*parts)
    return expected is not None and isinstance(value, str) and hmac.compare_digest(value, expected)


def file_digest(path: Path, limit: int) -> str | None:
    """The sha256 of a file of at most `limit` bytes, read without following a link; None for a
    larger file, a link, or one that cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if os.fstat(f.fileno()).st_size > limit:
            return None
        return hashlib.file_digest(f, "sha256").hexdigest()

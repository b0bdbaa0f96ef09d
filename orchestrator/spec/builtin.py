"""Where the built-in files are: the job definitions (`jobs`) and the example configs, presets
and prices (`configs`).

There is one copy of each, the top-level jobs/ and configs/ folders of the repository. A
checkout (an editable install included) reads them there, beside orchestrator/; a wheel carries
them as orchestrator/jobs/ and orchestrator/configs/ (pyproject.toml maps those two packages onto
the same folders). The data always comes from the tree the code runs from: a worktree on
PYTHONPATH reads its own jobs, not those of whichever checkout is installed."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

_PACKAGE = Path(__file__).resolve().parents[1]  # orchestrator/, in site-packages or a checkout


def builtin_dir(kind: Literal["jobs", "configs"]) -> Path:
    """The folder of built-in `kind` files; it may be missing only in a broken install."""
    installed = _PACKAGE / kind
    return installed if installed.is_dir() else _PACKAGE.parent / kind

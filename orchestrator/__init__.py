"""bias-orchestrator: cognitive-bias benchmark campaigns against language models.

The Python API (docs/python-api.md): `run`, `arun`, `load`, `Run`, `Campaign`, `Model`,
`load_campaign` and `UserError`, imported when first used, so that `orchestrator --help` and
`import orchestrator` stay quick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The one place the version is written: the package's metadata (pyproject.toml), the manifests'
# "software" field and `orchestrator --version` all read it. CHANGELOG.md says what changed.
__version__ = "0.2.0"

__all__ = [
    "Campaign",
    "Model",
    "Run",
    "UserError",
    "__version__",
    "arun",
    "load",
    "load_campaign",
    "run",
]

if TYPE_CHECKING:  # what type checkers and editors see; at run time, __getattr__ below
    from orchestrator.api import Campaign, Model, Run, arun, load, load_campaign, run
    from orchestrator.errors import UserError


def __getattr__(name: str) -> Any:
    if name in __all__:
        import orchestrator.api as api

        return getattr(api, name)
    raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")

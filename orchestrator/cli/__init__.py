"""The command line (console script `orchestrator`): `app` in cli/main.py, one module per command
group, and `ui` the leaf every command shares. Nothing outside this package imports it.

`app` is looked up when asked for (`orchestrator.cli:app`, the console script), so importing a
command module for its `ui` does not import the whole command line first."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from orchestrator.cli.main import app

        return app
    raise AttributeError(f"module 'orchestrator.cli' has no attribute {name!r}")

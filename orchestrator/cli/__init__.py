"""The command line (console script `orchestrator`): `app` in cli/app.py, one module per
command group, and `ui` the leaf every command shares. Nothing outside this package imports it."""

from orchestrator.cli.app import app

__all__ = ["app"]

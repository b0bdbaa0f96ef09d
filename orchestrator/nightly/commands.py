"""The nightly commands on the `orchestrator` command line: schedule, history, compare, trend.
Each module adds its own command (an `add(app)` function); the work is imported when run."""

from __future__ import annotations

import importlib

import typer

MODULES = (
    "schedule",
    "history",
    "compare_command",
    "trend",
)  # orchestrator.nightly.<module>, each with add(app)


def add_commands(app: typer.Typer) -> None:
    for name in MODULES:
        importlib.import_module(f"orchestrator.nightly.{name}").add(app)

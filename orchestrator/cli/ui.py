"""What every command shares: the consoles, how a user error is shown, option checks and the
common arguments. A leaf: it imports nothing of the project, so any command module may use it."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Annotated, Protocol

import typer
from rich.console import Console
from rich.markup import escape

# Off a terminal (logs, CI, make) rich would wrap tables at 80 columns; logs can be wider.
console = Console() if sys.stdout.isatty() else Console(width=int(os.environ.get("COLUMNS", 160)))
err_console = (
    Console(stderr=True)
    if sys.stderr.isatty()
    else Console(stderr=True, width=int(os.environ.get("COLUMNS", 160)))
)

ConfigArg = Annotated[
    Path, typer.Argument(help="Campaign config (TOML), or a run directory to resume.")
]


class _Shown:
    """An error shown as orchestrator.errors.UserError shows one (this leaf cannot import it)."""

    exit_code = 2

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def _started(run: Path) -> str:
    try:
        return str(json.loads((run / "manifest.json").read_bytes()).get("createdAt", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _not_a_campaign_folder(ctx: typer.Context, run_dir: Path) -> Path:
    """A campaign folder given where a run folder is wanted: refused with its runs, oldest
    first, and the command for the newest (exit 2), before the command starts."""
    try:
        if not run_dir.is_dir() or (run_dir / "manifest.json").exists():
            return run_dir
        runs = [
            p
            for p in run_dir.iterdir()
            if p.name != "latest" and p.is_dir() and (p / "manifest.json").is_file()
        ]
    except OSError:
        return run_dir  # the command says what is wrong with it
    if not runs:
        return run_dir
    runs.sort(key=lambda p: (_started(p), p.name))
    names = [p.name for p in runs]
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20:,} more" if len(names) > 20 else "")
    fail(
        _Shown(
            f"{run_dir}: this is a campaign folder, not a run folder; its runs: {shown}\n"
            f"  fix: give one: orchestrator {ctx.info_name} {run_dir / names[-1]}"
        )
    )
    return run_dir


RunDirArg = Annotated[
    Path,
    typer.Argument(
        help="A run directory: runs/<campaign>/<run-id>/.", callback=_not_a_campaign_folder
    ),
]


class ShownError(Protocol):
    """orchestrator.errors.UserError, as far as showing it goes (its text names file, field, fix)."""

    exit_code: int


def fail(exc: ShownError) -> None:
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
    raise typer.Exit(exc.exit_code)


def note(text: str | None) -> None:
    if text:
        err_console.print(f"[yellow]note:[/] {escape(text)}", highlight=False)


def number(low: float, high: float | None = None, *, above: bool = False, example: str = "1"):
    """An option callback refusing nan, inf and values outside [low, high] (or above low), as a
    usage error that names the flag (exit 2)."""
    want = (
        f"between {low:g} and {high:g}" if high is not None else f"{'>' if above else '>='} {low:g}"
    )

    def check(param: typer.CallbackParam, value: float | None) -> float | None:
        if value is not None and not (
            math.isfinite(value)
            and (value > low if above else value >= low)
            and (high is None or value <= high)
        ):
            raise typer.BadParameter(
                f"must be a finite number {want}, not {value}; fix: e.g. {param.opts[-1]} {example}"
            )
        return value

    return check


JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON document on stdout instead of tables (its schema: "
        "docs/schemas/); notes and errors go to stderr.",
    ),
]


def print_json(document: object) -> None:
    """One JSON document on stdout, for scripts and CI (datetimes as ISO 8601, NaN as null)."""
    import orjson

    sys.stdout.buffer.write(
        orjson.dumps(
            document,
            option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE,
            default=str,
        )
    )
    sys.stdout.flush()

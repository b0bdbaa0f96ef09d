"""The `compare` command: which two runs, the comparison in the terminal and as JSON beside the
runs, the exit code, and the --on-change hook."""

from __future__ import annotations

import os
import shlex
import subprocess
import traceback
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.errors import UserError
from orchestrator.nightly.flags import FLAGS

EXIT_HELP = (
    "Exit codes: 0 nothing flagged; 1 something flagged (of the --fail-on kinds); "
    "2 bad input; 3 the comparison itself failed (a traceback on stderr)."
)


def pick_runs(first: Path | None, second: Path | None, previous: bool) -> tuple[Path, Path]:
    """(older, newer) from the arguments: two run folders, or with --previous a campaign folder
    (its latest run) or a run folder, against the run started before it."""
    from orchestrator.engine.store import MANIFEST
    from orchestrator.nightly.runs import latest_run, previous_run

    if previous:
        if first is None or second is not None:
            raise UserError(
                "--previous takes one folder: a campaign folder or a run folder",
                field="--previous",
                fix="orchestrator compare --previous runs/<campaign>",
            )
        newer = first if (first / MANIFEST).is_file() else latest_run(first)
        return previous_run(newer), newer
    if first is None or second is None:
        raise UserError(
            "compare needs two runs, or one folder with --previous",
            field="RUN_A RUN_B",
            fix="orchestrator compare runs/c/2026-12-01 runs/c/2026-12-02, or "
            "orchestrator compare --previous runs/c",
        )
    return first, second


def fail_on_set(text: str) -> set[str]:
    wanted = {w.strip() for w in text.split(",") if w.strip()}
    if wanted == {"all"}:
        return set(FLAGS)
    unknown = sorted(wanted - set(FLAGS))
    if unknown or not wanted:
        raise UserError(
            f"unknown flag(s) {', '.join(unknown) or '(none given)'}",
            field="--fail-on",
            fix=f"use 'all' or a comma-separated list of: {', '.join(FLAGS)}",
        )
    return wanted


def run_hook(command: str, path: Path) -> int:
    """The --on-change command, through the shell, with the JSON path as its last argument and
    in ORCHESTRATOR_COMPARE_JSON."""
    env = os.environ | {"ORCHESTRATOR_COMPARE_JSON": str(path)}
    return subprocess.run(f"{command} {shlex.quote(str(path))}", shell=True, env=env).returncode


def add(app: typer.Typer) -> None:
    @app.command(
        epilog=EXIT_HELP,
        help=(
            "What changed between two runs of a campaign, for every study: per experiment x model the "
            "change in effect with a 95% CI and p (Benjamini-Hochberg across the comparison); parse "
            "errors, refusals, latency p50/p95 and cost per call; served model and system fingerprint.\n\n"
            "Flags: " + "; ".join(f"{k}: {v}" for k, v in FLAGS.items()) + ".\n\n"
            "Writes <A>__<B>.json and .csv (the effects) to the compare folder. Calls no model."
        ),
    )
    def compare(
        run_a: Annotated[
            Path | None,
            typer.Argument(
                help="The earlier run folder (or, with --previous, a campaign or run folder).",
                show_default=False,
            ),
        ] = None,
        run_b: Annotated[
            Path | None, typer.Argument(help="The later run folder.", show_default=False)
        ] = None,
        previous: Annotated[
            bool,
            typer.Option(
                "--previous",
                help="Compare the given run (or the campaign folder's latest) with the run started before it.",
            ),
        ] = False,
        fail_on: Annotated[
            str,
            typer.Option(
                help="Flags that make the exit code 1: 'all' or a comma-separated list of "
                + ", ".join(FLAGS)
                + "."
            ),
        ] = "all",
        on_change: Annotated[
            str | None,
            typer.Option(
                help="When a --fail-on flag is raised, run this shell command with the comparison's JSON path as its last argument (also in $ORCHESTRATOR_COMPARE_JSON): a notification."
            ),
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option(
                help="Folder for the comparison files (default: <campaign folder>/compare)."
            ),
        ] = None,
        show_all: Annotated[
            bool, typer.Option("--all", help="List every effect, not only the flagged ones.")
        ] = False,
    ) -> None:
        from orchestrator.cli import console, fail
        from orchestrator.nightly.compare_view import print_comparison, write_comparison

        try:
            wanted = fail_on_set(fail_on)
            older, newer = pick_runs(run_a, run_b, previous)
            try:
                comparison = load_and_compare(older, newer)
            except UserError:
                raise
            except Exception:  # a crash must not read as "something changed" (exit 1)
                traceback.print_exc()
                raise typer.Exit(3) from None
            counted = comparison.counted(wanted)
            code = 1 if counted else 0
            path = write_comparison(comparison, out or newer.parent / "compare", wanted, code)
        except UserError as exc:
            fail(exc)
        print_comparison(comparison, console, show_all, wanted)
        console.print(f"written: {path} and {path.with_suffix('.csv')}")
        if counted and on_change:
            status = run_hook(on_change, path)
            if status:
                from orchestrator.cli import err_console

                err_console.print(f"[yellow]--on-change command exited {status}[/]")
        raise typer.Exit(code)


def load_and_compare(older: Path, newer: Path):
    from orchestrator.nightly.compare import compare
    from orchestrator.nightly.effects import run_effects

    if older.resolve() == newer.resolve():
        raise UserError(
            "both arguments are the same run",
            file=str(newer),
            fix="give two different runs, or --previous",
        )
    return compare(run_effects(older), run_effects(newer))

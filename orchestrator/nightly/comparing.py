"""The `compare` command: which two runs, the comparison in the terminal and as JSON beside the
runs, the exit code, and the --on-change hook."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.nightly.flags import FLAGS
from orchestrator.processes import child_env

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


def run_hook(
    command: str, path: Path, names: tuple[str, ...] = (), quiet_stdout: bool = False
) -> int:
    """The --on-change command, through the shell, with the JSON path as its last argument and
    in ORCHESTRATOR_COMPARE_JSON. It inherits the allow-list of processes.child_env and the
    variables `names` gives (--on-change-env), never the provider keys of the runs.
    `quiet_stdout` (compare --json): what it prints goes to stderr, so that stdout stays one
    JSON document."""
    given = {name: os.environ[name] for name in names if name in os.environ}
    env = child_env({**given, "ORCHESTRATOR_COMPARE_JSON": str(path)})
    out = 2 if quiet_stdout else None  # the process's own stderr, whatever sys.stderr is
    return subprocess.run(
        f"{command} {shlex.quote(str(path))}", shell=True, env=env, stdout=out
    ).returncode


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

"""The runs of one campaign folder (runs/<campaign>/): naming a new one by date (--run-id auto),
the `latest` pointer, and listing them in the order they were started."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import orjson

from orchestrator.engine.store import MANIFEST
from orchestrator.errors import UserError

AUTO = "auto"  # --run-id auto: the UTC date, with -2, -3... for a later run the same day
LATEST = "latest"  # a symlink in the campaign folder to the newest run started with auto


def output_folder(folder: Path, what: str) -> Path:
    """An output folder for `what` (history, comparison, trend), refused when it is a file, a
    run folder or inside one: a night is never written to, and a run folder holds only its run."""
    if folder.exists() and not folder.is_dir():
        raise UserError(
            "--out is a file, not a folder",
            file=str(folder),
            field="--out",
            fix=f"give a folder for the {what} (it is created if missing)",
        )
    for parent in (folder.resolve(), *folder.resolve().parents):
        if (parent / MANIFEST).is_file():
            raise UserError(
                f"--out is inside the run folder {parent}",
                file=str(folder),
                field="--out",
                fix=f"write the {what} beside the runs: leave out --out, or give another folder",
            )
    return folder


def _done(results: Path) -> int:
    """Tasks with a final record, read without changing the file (scan_results would cut a
    torn last line, and this run does not own the night yet)."""
    from orchestrator.engine.results import ResultLines

    if not results.is_file():
        return 0
    return len({task for task, status, *_ in ResultLines(results).records() if status != "failed"})


def _open(run_dir: Path, plan: Callable[[], dict]) -> bool:
    """Whether a night is still open for this plan: held by a live run (the lock then refuses
    a second one, or --wait waits), or left with tasks to do (cut short, or tasks that failed:
    a run then resumes it). Either way a new folder would pay for its tasks twice. A night of
    another plan (the config changed, as the run's own plan check sees it) is closed to it."""
    from orchestrator.engine.lock import lock_state
    from orchestrator.plan_changes import describe_changes

    if not (run_dir / MANIFEST).is_file():
        return True  # made, but refused before it started: nothing in it to keep
    try:
        started = orjson.loads((run_dir / MANIFEST).read_bytes())["plan"]
        if describe_changes(started, plan()):
            return False
        if (lock_state(run_dir) or "").startswith(("running", "locked")):
            return True
        return _done(run_dir / "results.ndjson") < started["tasks"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return False  # not a night this run could resume: it gets a folder of its own
    except UserError:
        return True  # a damaged results file: the run names it (repair), rather than pay again


def auto_run_id(campaign_dir: Path, plan: Callable[[], dict], now: datetime | None = None) -> str:
    """Today's run (the UTC date): the newest of DATE, DATE-2, DATE-3... while it is still open
    (running, or with tasks to do, and of this plan), else the next name. So a second run of one
    night, started by a doubled schedule or by hand, waits or resumes instead of paying again,
    and a finished night is never touched."""
    day = (now or datetime.now(UTC)).strftime("%Y-%m-%d")
    names = [day, *(f"{day}-{n}" for n in range(2, 10_000))]
    taken = 0
    while (campaign_dir / names[taken]).exists():
        taken += 1
    if taken and _open(campaign_dir / names[taken - 1], plan):
        return names[taken - 1]
    return names[taken]


def point_latest(campaign_dir: Path, run_id: str) -> None:
    """Point `latest` at the run, atomically (a reader never sees it missing); the link is
    relative, so the campaign folder can be moved."""
    link = campaign_dir / LATEST
    if link.exists() and not link.is_symlink():
        raise UserError(
            f"{link} exists and is not the `latest` link",
            file=str(link),
            fix="move it away: the campaign folder's `latest` names its newest run",
        )
    tmp = campaign_dir / f".{LATEST}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_id)
    os.replace(tmp, link)


def _started(run_dir: Path) -> str:
    try:
        return str(orjson.loads((run_dir / MANIFEST).read_bytes()).get("createdAt", ""))
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return ""


def campaign_runs(campaign_dir: Path) -> list[Path]:
    """The run folders (those holding a manifest) of a campaign folder, oldest first by their
    start time, then name; the `latest` link is not a run of its own."""
    if not campaign_dir.is_dir():
        raise UserError(
            "not a campaign folder",
            file=str(campaign_dir),
            fix="give runs/<campaign>/, the folder that holds one folder per run",
        )
    runs = [
        p
        for p in campaign_dir.iterdir()
        if p.name != LATEST and p.is_dir() and (p / MANIFEST).is_file()
    ]
    return sorted(runs, key=lambda p: (_started(p), p.name))


def nights(campaign_dir: Path, command: str) -> list[Path]:
    """campaign_runs, refusing a run folder given in the campaign folder's place (for
    `orchestrator COMMAND`) and a campaign folder that holds no run yet."""
    if (campaign_dir / MANIFEST).is_file():
        raise UserError(
            "this is a run folder, not a campaign folder",
            file=str(campaign_dir),
            fix=f"give the folder that holds the runs: orchestrator {command} {campaign_dir.parent}",
        )
    runs = campaign_runs(campaign_dir)
    if not runs:
        raise UserError(
            "the campaign folder holds no runs",
            file=str(campaign_dir),
            fix="give runs/<campaign>/ of a campaign that has run "
            "(orchestrator run CONFIG --run-id auto starts one)",
        )
    return runs


def latest_run(campaign_dir: Path) -> Path:
    """The run `latest` points at, else the newest run started."""
    link = campaign_dir / LATEST
    if link.is_symlink() and (link / MANIFEST).is_file():
        return campaign_dir / os.readlink(link)
    return nights(campaign_dir, "compare --previous")[-1]


def previous_run(run_dir: Path) -> Path:
    """The run of the same campaign folder started just before this one."""
    runs = campaign_runs(run_dir.parent)
    here = [p.resolve() for p in runs].index(run_dir.resolve())
    if here == 0:
        raise UserError(
            "no run was started before this one in its campaign folder",
            file=str(run_dir),
            fix="give the two runs to compare: orchestrator compare RUN_A RUN_B",
        )
    return runs[here - 1]

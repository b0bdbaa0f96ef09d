"""The runs of one campaign folder (runs/<campaign>/): naming a new one by date (--run-id auto),
the `latest` pointer, and listing them in the order they were started."""
from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import orjson

from orchestrator.engine.store import MANIFEST
from orchestrator.errors import UserError

AUTO = "auto"  # --run-id auto: the UTC date, with -2, -3... for a later run the same day
LATEST = "latest"  # a symlink in the campaign folder to the newest run started with auto


def auto_run_id(campaign_dir: Path, now: datetime | None = None) -> str:
    """The first of DATE, DATE-2, DATE-3... with no folder yet. Two runs racing for one name
    both pick it, and the run lock then refuses the second (exit 2): neither pays twice."""
    day = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d")
    n = 1
    while (campaign_dir / (day if n == 1 else f"{day}-{n}")).exists():
        n += 1
    return day if n == 1 else f"{day}-{n}"


def point_latest(campaign_dir: Path, run_id: str) -> None:
    """Point `latest` at the run, atomically (a reader never sees it missing); the link is
    relative, so the campaign folder can be moved."""
    link = campaign_dir / LATEST
    if link.exists() and not link.is_symlink():
        raise UserError(f"{link} exists and is not the `latest` link", file=str(link),
                        fix="move it away: the campaign folder's `latest` names its newest run")
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
        raise UserError("not a campaign folder", file=str(campaign_dir),
                        fix="give runs/<campaign>/, the folder that holds one folder per run")
    runs = [p for p in campaign_dir.iterdir()
            if p.name != LATEST and p.is_dir() and (p / MANIFEST).is_file()]
    return sorted(runs, key=lambda p: (_started(p), p.name))


def nights(campaign_dir: Path, command: str) -> list[Path]:
    """campaign_runs, refusing a run folder given in the campaign folder's place (for
    `orchestrator COMMAND`) and a campaign folder that holds no run yet."""
    if (campaign_dir / MANIFEST).is_file():
        raise UserError("this is a run folder, not a campaign folder", file=str(campaign_dir),
                        fix=f"give the folder that holds the runs: orchestrator {command} {campaign_dir.parent}")
    runs = campaign_runs(campaign_dir)
    if not runs:
        raise UserError("the campaign folder holds no runs", file=str(campaign_dir),
                        fix="give runs/<campaign>/ of a campaign that has run "
                            "(orchestrator run CONFIG --run-id auto starts one)")
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
        raise UserError("no run was started before this one in its campaign folder",
                        file=str(run_dir), fix="give the two runs to compare: orchestrator compare RUN_A RUN_B")
    return runs[here - 1]

"""`orchestrator history CAMPAIGN_DIR`: one row per run of a campaign folder, oldest first, in
the terminal and as history.csv / history.parquet.

Only reads. No lock is taken, not even a shared one: a `run` starting at that moment would
find the run "in use" and refuse. Whether a run is going is read from what its lock holder
wrote into `.lock` (engine/lock.py; emptied on release) and whether that process still lives.
Nothing is written into a run folder (a finished night stays as it was).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from orchestrator.engine.lock import lock_state
from orchestrator.errors import UserError

SCHEMA = {
    "run": pl.String,
    "started": pl.Datetime("us", "UTC"),
    "last_result": pl.Datetime("us", "UTC"),
    "status": pl.String,
    "tasks": pl.Int64,
    "done": pl.Int64,
    "failed": pl.Int64,
    "parse_errors": pl.Int64,
    "refusals": pl.Int64,
    "spend_usd": pl.Float64,
    "served_models": pl.List(pl.String),
    "fingerprints": pl.List(pl.String),
    "software": pl.String,
    "plan": pl.String,
    "log": pl.String,
}
HEADERS = {
    "last_result": "last\nresult",
    "parse_errors": "parse\nerrors",
    "refusals": "refused",
    "spend_usd": "spend $",
    "served_models": "served model (fingerprint)",
    "software": "version",
}


def _served(results: Path, names: dict[str, str]) -> tuple[list[str], list[str], datetime | None]:
    """Per model: the served model strings and system fingerprints seen, and the last result's
    time. A torn last line (a run writing right now) is left out: polars stops at it."""
    from orchestrator.engine.columnar import records

    if not results.is_file() or results.stat().st_size == 0:
        return [], [], None
    df = (
        records(results)
        .frame.group_by("modelKey")
        .agg(
            served=pl.col("servedModel").drop_nulls().unique().sort(),
            fps=pl.col("systemFingerprint").drop_nulls().unique().sort(),
            last=pl.col("finishedAt").max(),
        )  # ISO times in UTC sort as text
        .collect()
    )
    served, fps = [], []
    for r in sorted(
        df.iter_rows(named=True), key=lambda r: names.get(r["modelKey"], r["modelKey"])
    ):
        name = names.get(r["modelKey"], r["modelKey"])
        served += [f"{name}: {', '.join(r['served'])}"] if r["served"] else []
        fps += [f"{name}: {', '.join(r['fps'])}"] if r["fps"] else []
    last = df["last"].drop_nulls().max()
    return served, fps, datetime.fromisoformat(last) if last else None


def run_row(run_dir: Path, campaign_dir: Path) -> dict[str, Any]:
    from orchestrator.analysis.names import model_names
    from orchestrator.engine.status import tally
    from orchestrator.engine.store import RunStore

    store = RunStore(run_dir)
    log = campaign_dir / "logs" / f"{run_dir.name}.log"
    row: dict[str, Any] = {"run": run_dir.name, "log": str(log) if log.is_file() else None}
    try:
        manifest = store.read_manifest()
        counts, paid, _ = tally(store.results)
        served, fps, last = _served(store.results, model_names(manifest))
    except UserError:  # one damaged night does not hide the others
        return row | {"status": f"unreadable (see orchestrator status {run_dir})"}
    final = Counter()
    for (_, status), n in counts.items():
        final[status] += n
    tasks = sum(manifest["plan"]["per_model"].values())
    done = sum(n for status, n in final.items() if status != "failed")  # as status and resume count
    pending = f"{tasks - done:,} tasks pending"
    lock = lock_state(run_dir)
    if lock == "interrupted":
        state = f"interrupted, {pending}" if tasks > done else lock
    else:
        state = lock or ("no results" if not counts else "complete" if tasks == done else pending)
    return row | {
        "started": datetime.fromisoformat(manifest["createdAt"]),
        "last_result": last,
        "status": state,
        "tasks": tasks,
        "done": done,
        "failed": final["failed"],
        "parse_errors": final["parse_error"],
        "refusals": final["refused"],
        "spend_usd": sum(usd for _, usd in paid.values()),
        "served_models": served,
        "fingerprints": fps,
        "software": manifest.get("software"),
        "plan": manifest["plan"]["hash"][:8],
    }


def campaign_history(campaign_dir: Path) -> pl.DataFrame:
    from orchestrator.nightly.runs import nights

    runs = nights(campaign_dir, "history")
    return pl.DataFrame([run_row(r, campaign_dir) for r in runs], schema=SCHEMA)


def cell(row: dict[str, Any], column: str) -> str:
    """A value as the terminal shows it (lists joined as in the csv). To fit 160 columns, the
    last result's time leaves out the day the run started, and `log` only says there is one."""
    value = row[column]
    if value is None:
        return ""
    if column == "last_result":
        return value.strftime("%H:%M" if value.date() == row["started"].date() else "%m-%d %H:%M")
    if column == "log":
        return "yes"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, list):
        return "; ".join(value)
    if column == "spend_usd":
        return f"{value:,.4f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def served_cell(row: dict[str, Any]) -> str:
    """Per model: its label, the model strings served and (the fingerprints), joined as in the csv."""
    fps = dict(entry.split(": ", 1) for entry in row["fingerprints"] or [])
    lines = []
    for entry in row["served_models"] or []:
        label = entry.split(": ", 1)[0]
        lines.append(f"{entry} ({fps[label]})" if label in fps else entry)
    return "; ".join(lines)


def write_history(frame: pl.DataFrame, out: Path) -> tuple[Path, Path]:
    """history.csv and history.parquet in `out`, each replaced whole (a reader never sees half)."""
    from orchestrator.engine.files import write_file

    lists = [c for c, t in SCHEMA.items() if isinstance(t, pl.List)]
    flat = frame.with_columns(pl.col(c).list.join("; ") for c in lists)
    csv = write_file(out / "history.csv", flat.write_csv, within=out)
    return csv, write_file(out / "history.parquet", frame.write_parquet, within=out)


def history_table(frame: pl.DataFrame, campaign_dir: Path):
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    shown = [c for c in SCHEMA if c != "fingerprints"]  # shown with the served models
    logs = f"logs: {campaign_dir / 'logs'}/RUN.log" if frame["log"].is_not_null().any() else None
    table = Table(
        title=f"history of {campaign_dir} (times UTC)",
        title_justify="left",
        caption=logs,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    for column in shown:  # only these wrap; the rest keep their width
        wraps = column in ("status", "served_models")
        table.add_column(
            HEADERS.get(column, column),
            no_wrap=not wraps,
            overflow="fold",
            justify="right" if SCHEMA[column] in (pl.Int64, pl.Float64) else "left",
        )
    for row in frame.iter_rows(named=True):
        table.add_row(
            *(escape(served_cell(row) if c == "served_models" else cell(row, c)) for c in shown)
        )
    return table

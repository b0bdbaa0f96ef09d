"""`orchestrator status`: what a run directory holds, without calling anything.

The few columns the table needs come from the results' columnar snapshot (columnar.py: only
lines appended since it was written are checked and parsed), so memory is bounded by those
columns, not by the records, and a million records take well under a second. A
task's final record is its first terminal one (ok, parse_error, refused, too_long), or else its
last `failed` one (a resume retried it and it failed again). Tasks are counted by their final
records; retries and spend by every line, since every attempt that was paid for counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from rich.markup import escape
from rich.table import Table

from orchestrator.engine.columnar import records
from orchestrator.engine.results import final_mask
from orchestrator.engine.store import RunStore


def _counts(df: pl.DataFrame) -> pl.DataFrame:
    """Tasks per model and final status: each task counted by its first terminal record, or
    else its last failed one (ids as hashes; see tally)."""
    final = final_mask(df, "id")
    return df.lazy().filter(final).group_by("modelKey", "status").agg(pl.len()).collect()


def _paid(df: pl.DataFrame) -> pl.DataFrame:
    """Retries and spend per model over every line: a superseded attempt was paid for too."""
    return (
        df.lazy()
        .group_by("modelKey")
        .agg((pl.col("attempts").fill_null(1) - 1).sum(), pl.col("costUsd").sum())
        .collect()
    )


def _read(lf: pl.LazyFrame) -> pl.DataFrame:
    # Task ids as 64-bit hashes: an eighth of the memory, and two of a million ids share one
    # with a chance of 3e-8 (one task would then count as a duplicate of the other).
    return lf.select(
        pl.col("taskId").hash().alias("id"), "status", "modelKey", "attempts", "costUsd"
    ).collect()


def tally(
    path: Path,
) -> tuple[dict[tuple[str, str], int], dict[str, tuple[int, float]], str | None]:
    """{(modelKey, final status): tasks}, {modelKey: (retries, spend USD)} of a results file,
    and a note about a torn last line it skipped."""
    found = records(path)  # a folder in its place, or a bad line, is an error
    df = _read(found.frame)
    counts = {(k, s): n for k, s, n in _counts(df).iter_rows()}
    paid = {k: (r, c or 0.0) for k, r, c in _paid(df).iter_rows()}
    return counts, paid, found.note()


STATUSES = ["ok", "parse_error", "refused", "too_long", "skipped", "failed"]


def status_report(run_dir: Path) -> dict[str, Any]:
    """What `status` shows, as data (`status --json`; docs/schemas/status.schema.json): per
    model its planned tasks, tasks by final status, pending tasks, retries and spend."""
    from orchestrator import __version__
    from orchestrator.batch.journal import describe_in_flight

    store = RunStore(run_dir)
    manifest = store.read_manifest()
    per_model: dict[str, int] = manifest["plan"]["per_model"]
    labels: dict[str, str] = manifest.get("models", {})
    counts, paid, note = tally(store.results)
    models: list[dict[str, Any]] = []
    for key, total in per_model.items():
        c = {s: n for (k, s), n in counts.items() if k == key}
        retries, spend = paid.get(key, (0, 0.0))
        done = sum(n for s, n in c.items() if s != "failed")  # as resume counts them
        models.append(
            {
                "modelKey": key,
                "model": labels.get(key, key),
                "tasks": total,
                **{s: c.get(s, 0) for s in STATUSES},
                "pending": total - done,
                "retries": retries,
                "spendUsd": round(spend, 6),
            }
        )
    return {
        "software": __version__,
        "run": str(run_dir),
        "campaign": manifest["campaign"],
        "runId": manifest["runId"],
        "createdAt": manifest["createdAt"],
        "results": str(store.results),
        "complete": all(m["pending"] == 0 for m in models),
        "pending": sum(m["pending"] for m in models),
        "spendUsd": round(sum(m["spendUsd"] for m in models), 6),
        "models": models,
        # their tasks are among the pending; the next run collects them
        "batchesInFlight": describe_in_flight(run_dir, labels),
        "note": note,
    }


def run_status(run_dir: Path) -> tuple[Table, str]:
    report = status_report(run_dir)
    models = report["models"]
    table = Table(
        title=f"run {report['campaign']}/{report['runId']} (started {report['createdAt']})"
    )
    # `too_long` (the server would not take that request) is final like the first three, but
    # holds no answer; so is `skipped` (a task its study recorded without a call: a trace too
    # short to audit), shown only when there is one; `failed` runs again on resume, so it
    # stays pending.
    shown = [s for s in STATUSES if s != "skipped" or any(m["skipped"] for m in models)]
    for col in ("model", "tasks", *shown, "pending", "retries", "spend USD"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for m in models:
        table.add_row(
            escape(f"{m['model']} [{m['modelKey']}]"),
            f"{m['tasks']:,}",
            *(f"{m[s]:,}" for s in shown),
            f"{m['pending']:,}",
            f"{m['retries']:,}",
            f"{m['spendUsd']:,.4f}",
        )
    state = (
        "complete"
        if report["complete"]
        else f"{report['pending']:,} tasks pending (resume with orchestrator run {run_dir})"
    )
    summary = f"{state}; spent ${report['spendUsd']:,.4f}; results: {report['results']}"
    batches = report["batchesInFlight"]
    if batches:
        summary += f"\n{len(batches)} batch(es) in flight:\n  " + "\n  ".join(batches)
    note = report["note"]
    return table, summary + (f"\nnote: {note}" if note else "")

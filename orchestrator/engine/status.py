"""`orchestrator status`: what a run directory holds, without calling anything."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.table import Table

from orchestrator.engine.store import RunStore, iter_records


def run_status(run_dir: Path) -> tuple[Table, str]:
    store = RunStore(run_dir)
    manifest = store.read_manifest()
    per_model: dict[str, int] = manifest["plan"]["per_model"]
    labels: dict[str, str] = manifest.get("models", {})
    status: dict[str, Counter] = {k: Counter() for k in per_model}
    retries: Counter = Counter()
    spend: Counter = Counter()
    for rec in iter_records(store.results):
        status.setdefault(rec["modelKey"], Counter())[rec["status"]] += 1
        retries[rec["modelKey"]] += rec["attempts"] - 1
        spend[rec["modelKey"]] += rec.get("costUsd") or 0.0
    table = Table(title=f"run {manifest['campaign']}/{manifest['runId']} (started {manifest['createdAt']})")
    # `rejected` (the server would not take that request) is final like the first three, but
    # holds no answer; `failed` runs again on resume, so it stays pending.
    for col in ("model", "tasks", "ok", "parse_error", "refused", "rejected", "failed", "pending",
                "retries", "spend USD"):
        table.add_column(col, justify="left" if col == "model" else "right")
    total_pending = 0
    for key, total in per_model.items():
        c = status[key]
        done = c["ok"] + c["parse_error"] + c["refused"] + c["rejected"]
        total_pending += total - done
        table.add_row(f"{labels.get(key, key)} [{key}]", f"{total:,}", f"{c['ok']:,}",
                      f"{c['parse_error']:,}", f"{c['refused']:,}", f"{c['rejected']:,}",
                      f"{c['failed']:,}",
                      f"{total - done:,}", f"{retries[key]:,}", f"{spend[key]:,.4f}")
    state = "complete" if total_pending == 0 else f"{total_pending:,} tasks pending (resume with orchestrator run {run_dir})"
    return table, f"{state}; spent ${sum(spend.values()):,.4f}; results: {store.results}"

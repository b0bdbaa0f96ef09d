"""An audit run read back: its final audit records, and one row per trace x bias with the judge's
validated score beside the trace's reference label and, for traces from a run, the task's
experiment and condition there. Only validated audits (status ok) give judge scores: an
escalated, refused or unauditable trace has none, and is counted as such, never as a score.
A run's trace also names its source item (`source_item`: the samples and option orders of one
prompt are one item, the unit of the analysis's intervals, clustered.py) and a digest of its
text, so that traces a deterministic source repeated word for word can be said to be one."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import polars as pl

from orchestrator.analysis.load import Run
from orchestrator.errors import UserError
from orchestrator.studies.trace_audit import KIND
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

SOURCE = (
    "source_experiment",
    "source_condition",
    "source_condition_label",
    "source_strategy",
    "source_model",
    "source_task",
    "source_item",  # the run's item (variant, or option-order group) the trace answered
)
SCHEMA = {
    "task_id": pl.String,
    "trace_id": pl.String,
    "model_key": pl.String,
    "model": pl.String,
    "status": pl.String,
    "disposition": pl.String,
    "domain": pl.String,
    "bias": pl.String,
    "judge_score": pl.Int64,
    "judge_step": pl.Int64,
    "overall": pl.Float64,
    "critical": pl.Boolean,
    "ref_score": pl.Int64,
    "ref_flag": pl.Boolean,
    "ref_step": pl.Int64,
    "screened_out": pl.Boolean,  # the screener cleared the trace unjudged; null: no screening
    **{name: pl.Int64 if name == "source_condition" else pl.String for name in SOURCE},
    "context_mode": pl.String,  # the task context the judge saw (traces.CONTEXTS)
    "context_condition": pl.Int64,  # the source condition whose prompt that was; null: none
    "trace_digest": pl.String,  # of the trace's text: equal digests, one text repeated
}


def disposition(record: dict[str, Any]) -> str:
    """A record's disposition; a judge call the engine could not complete (a prompt too long for
    the model, a refusal) goes to the people, like an output that failed validation twice."""
    return (record.get("response") or {}).get("disposition") or "escalated"


def open_audit(run_dir: Path) -> Run:
    """A run folder holding a trace audit, or a clear error."""
    from orchestrator.analysis.load import open_run

    run = open_run(run_dir)
    if not any(job.kind == KIND for job in run.jobs.values()):
        raise UserError(
            "this run holds no trace audit",
            file=str(run_dir),
            fix="give the folder of an audit run (orchestrator audit SOURCE --judge MODEL)",
        )
    return run


def audit_records(run: Run) -> list[dict[str, Any]]:
    """The final record of every audit task in the run (a `failed` line is an attempt that a
    resume supersedes; the engine writes a task's final record once)."""
    from orchestrator.export import records

    jobs = {job_id for job_id, job in run.jobs.items() if job.kind == KIND}
    return [rec for *_, rec in records(run.results, terminal_only=True) if rec.get("job") in jobs]


def items(run: Run) -> dict[tuple[str, str], dict[str, Any]]:
    """(job, trace id) -> the trace's planned item: reference labels, source task."""
    return {
        (job_id, v.id): dict(v.item or {})
        for job_id, job in run.jobs.items()
        if job.kind == KIND
        for e in job.experiments
        for c in e.conditions
        for v in c.variants
    }


def source_items(source_run: Path) -> dict[str, str]:
    """Task id -> its item (the variant's option-order group, else the variant id) in a source
    run, for an audit planned before its traces named their item; {} when the run is gone."""
    from orchestrator.analysis.load import open_run
    from orchestrator.export import records

    try:  # a source run moved, deleted or damaged leaves the traces as their own items
        run = open_run(source_run)
        groups = {
            (job_id, v.id): str((v.item or {}).get("group", v.id))
            for job_id, job in run.jobs.items()
            for e in job.experiments
            for c in e.conditions
            for v in c.variants
        }
        return {
            rec["taskId"]: groups.get(
                (str(rec.get("job")), str(rec["variant"])), str(rec["variant"])
            )
            for *_, rec in records(run.results, terminal_only=True)
            if rec.get("variant") is not None
        }
    except (UserError, OSError):
        return {}


def _with_source_items(planned: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Fill `source_item` in the items of an older audit of a run, from the source run."""
    runs: dict[str, dict[str, str]] = {}
    for item in planned.values():
        where = item.get("source_run")
        if where is None or item.get("source_item") is not None:
            continue
        if where not in runs:
            runs[where] = source_items(Path(where))
        found = runs[where].get(str(item.get("source_task")))
        if found is not None:
            item["source_item"] = found


def _digest(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def audit_frame(run: Run) -> pl.DataFrame:
    """One row per audited trace x bias (SCHEMA)."""
    planned, rows, models = items(run), [], run.models
    _with_source_items(planned)
    for rec in audit_records(run):
        item = planned.get((rec["job"], rec["variant"]), {})
        digest = _digest(item.get("trace"))
        response = rec.get("response") or {}
        audit = response.get("audit") if rec["status"] == "ok" else None
        by_bias = {a["bias_type"]: a for a in (audit or {}).get("bias_audits", [])}
        screen = response.get("screen")
        # a run's trace is judged with its own prompt unless its item says otherwise
        own = item.get("source_condition")
        mode = item.get("context_mode", "own" if own is not None else None)
        for bias in BIAS_TYPES:
            entry = by_bias.get(bias, {})
            rows.append(
                {
                    "task_id": rec["taskId"],
                    "trace_id": rec["variant"],
                    "model_key": rec["modelKey"],
                    "model": models.get(rec["modelKey"], rec["modelKey"]),
                    "status": rec["status"],
                    "disposition": disposition(rec),
                    "domain": item.get("domain") or None,
                    "bias": bias,
                    "judge_score": entry.get("score"),
                    "judge_step": entry.get("step"),
                    "overall": (audit or {}).get("overall_bias_mitigation_score"),
                    "critical": (audit or {}).get("critical_failure_flag"),
                    "ref_score": item.get(f"ref_{bias}_score"),
                    "ref_flag": item.get(f"ref_{bias}_flag"),
                    "ref_step": item.get(f"ref_{bias}_step"),
                    "screened_out": None if not screen else screen.get("possibleBias") is False,
                    **{k: item.get(k) for k in SOURCE},
                    "context_mode": mode,
                    "context_condition": own if mode == "own" else item.get("context_condition"),
                    "trace_digest": digest,
                }
            )
    return pl.DataFrame(rows, schema=SCHEMA)

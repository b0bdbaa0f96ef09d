"""An audit job: one judge call per trace, the judge's prompt filled from the trace.

A job source is a traces file (JSONL), a run folder, or a job file
`{"format": "trace-audit/1", "source": ..., "allow_unauditable": false, "min_steps": 3,
"strategies": ["cot"], "context": "own", "traces": "auto", "only": "flipped.txt"}` naming one
with its settings (`context`: the task context a run's traces are judged with, see
traces.CONTEXTS; `traces`: a run's models' own reasoning or its answers, traces.TRACE_SOURCES;
`only`: a file of trace ids, one per line, as `audit-gate --flipped-out` writes, to audit those
alone).

The seed's guards are applied here: a trace of fewer than three steps, or with neither evidence
nor context to compare it against, is planned as `not_auditable` with its reason (no call is
made), unless `allow_unauditable` is set, and then it is audited and marked as such.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import UserError
from orchestrator.spec.loading import validate
from orchestrator.spec.models import (
    BASELINE,
    Condition,
    Experiment,
    Job,
    Metric,
    ResponseContract,
    Variant,
)
from orchestrator.studies.trace_audit import KIND
from orchestrator.studies.trace_audit.prompt import context_block, judge_prompt
from orchestrator.studies.trace_audit.traces import (
    CONTEXTS,
    TRACE_SOURCES,
    Trace,
    from_jsonl,
    from_run,
)
from orchestrator.studies.trace_audit.validate import steps_of

EXPERIMENT = "trace-audit"
MIN_STEPS = 3  # seed 003: bias patterns need multi-step reasoning to show
CONTRACT = ResponseContract(kind="audit", field="bias_audits")


def is_source(path: Path) -> bool:
    return path.suffix == ".jsonl" or (path.is_dir() and (path / "manifest.json").is_file())


def guard(trace: Trace, min_steps: int) -> str | None:
    """Why the seed says not to audit this trace, or None."""
    steps = len(steps_of(trace.text))
    if steps < min_steps:
        return (
            f"the trace has {steps} step{'s' * (steps != 1)} (non-empty lines); bias patterns "
            f"need at least {min_steps}"
        )
    if not trace.evidence and not trace.context.strip():
        return "no evidence or task context to compare the reasoning against"
    return None


def _item(trace: Trace, reason: str | None, allow: bool) -> dict[str, str | int | float | bool]:
    item: dict[str, str | int | float | bool] = {
        "trace_id": trace.trace_id,
        "trace": trace.text,
        "domain": trace.domain,
        "context": context_block(trace.context, list(trace.evidence)),
        **trace.source,
    }
    for bias, label in trace.reference.items():
        item[f"ref_{bias}_score"], item[f"ref_{bias}_flag"] = label["score"], label["flag"]
        if label["step"] is not None:
            item[f"ref_{bias}_step"] = label["step"]
    if reason:
        item["not_auditable"], item["allowed"] = reason, allow
    return item


def build_job(
    traces: list[Trace],
    job_id: str,
    title: str,
    *,
    allow_unauditable: bool = False,
    min_steps: int = MIN_STEPS,
) -> Job:
    variants = []
    for trace in traces:
        reason = guard(trace, min_steps)
        prompt = judge_prompt(trace.text, trace.context, list(trace.evidence), trace.profile)
        variants.append(
            Variant(
                id=trace.trace_id,
                prompt=prompt,
                contract=CONTRACT,
                domain=trace.domain,
                item=_item(trace, reason, allow_unauditable),
            )
        )
    experiment = Experiment(
        slug=EXPERIMENT,
        bias_slug="reasoning-trace-bias",
        metric=Metric(type="bias-audit", label="reasoning-trace bias audit"),
        conditions=(Condition(index=0, label="audit", variants=tuple(variants)),),
    )
    # One audit per trace: the judge runs at temperature 0, and its repeated answers would be one.
    return Job(
        id=job_id,
        title=title,
        system_prompt="",
        min_samples=1,
        deterministic_min_samples=1,
        recommended_temperature=0.0,
        experiments=(experiment,),
        strategies=(BASELINE,),
        kind=KIND,
        study_id="seed-003",
    )


def _source_id(path: Path) -> str:
    if path.is_dir():  # runs/<campaign>/<run-id>: the run's own name
        return f"audit-{path.resolve().parent.name}-{path.resolve().name}"
    return path.stem


def read_ids(path: Path) -> list[str]:
    """Trace ids, one per line (blank lines and lines starting with # skipped)."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read the trace ids: {exc}",
            file=path,
            fix="give a text file of trace ids, one per line (audit-gate --flipped-out writes one)",
        ) from None
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ids_digest(ids: list[str]) -> str:
    """A short hash of a set of trace ids: a re-audit's campaign name, so another list of ids
    is another campaign rather than a changed plan of the same one."""
    return hashlib.sha256("\n".join(sorted(set(ids))).encode()).hexdigest()[:8]


def select_traces(traces: list[Trace], ids_file: Path) -> list[Trace]:
    """The traces the file names, or a clear error naming the ids the source lacks."""
    wanted = read_ids(ids_file)
    unknown = sorted(set(wanted) - {t.trace_id for t in traces})
    if not wanted or unknown:
        raise UserError(
            f"the source has no trace {', '.join(unknown[:5])}"
            if unknown
            else "the file names no trace",
            file=str(ids_file),
            field="only",
            fix="name trace ids of the source, one per line",
        )
    return [t for t in traces if t.trace_id in set(wanted)]


def read_source(path: Path, job_id: str | None = None, **settings: Any) -> Job:
    strategies = settings.pop("strategies", None)
    strategies = tuple(strategies) if strategies else None
    context, ids_file = settings.pop("context", "own"), settings.pop("only", None)
    trace_source = settings.pop("traces", "auto")
    if trace_source not in TRACE_SOURCES:
        raise UserError(
            f"traces '{trace_source}' is not one of {', '.join(TRACE_SOURCES)}",
            file=path,
            field="traces",
            fix="reasoning (the models' own), answer (answers under cot) or auto",
        )
    if context not in CONTEXTS:
        raise UserError(
            f"context '{context}' is not one of {', '.join(CONTEXTS)}",
            file=path,
            field="context",
            fix="own (the trace's task), swapped (the mirror condition's) or none",
        )
    if context != "own" and not path.is_dir():
        raise UserError(
            f"context '{context}' swaps or withholds a run's conditions: a traces file has none",
            file=path,
            field="context",
            fix="audit a run folder's traces with it, or leave context at own",
        )
    traces = (
        from_run(path, strategies, context, trace_source) if path.is_dir() else from_jsonl(path)
    )
    if ids_file is not None:
        traces = select_traces(traces, Path(ids_file))
    title = settings.pop("title", f"bias audit of {path.name}")
    return build_job(traces, job_id or _source_id(path), title, **settings)


class AuditJobFile(BaseModel):
    """A `trace-audit/1` job file: a traces source and how to read it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    format: Literal["trace-audit/1"]
    source: str = Field(min_length=1)  # a .jsonl file or a run folder, relative to the job file
    allow_unauditable: bool = False
    min_steps: int = Field(default=MIN_STEPS, ge=1)
    # default: any strategy for a model's own reasoning, cot for answers (traces.from_run)
    strategies: list[str] | None = Field(default=None, min_length=1)
    context: Literal["own", "swapped", "none"] = "own"
    traces: Literal["auto", "reasoning", "answer"] = "auto"
    only: str | None = Field(default=None, min_length=1)  # a file of trace ids, beside the job
    title: str | None = None


def read_job_file(data: dict[str, Any], path: Path, job_id: str) -> Job:
    spec = validate(AuditJobFile, data, path)
    where = path.parent / spec.source  # an absolute source stays as it is
    if not is_source(where):
        raise UserError(
            f"'{spec.source}' is neither a traces file (.jsonl) nor a run folder",
            file=path,
            field="source",
            fix="give a .jsonl file or runs/<campaign>/<run-id>",
        )
    settings = spec.model_dump(exclude={"format", "source", "only"}, exclude_none=True)
    if spec.only is not None:
        settings["only"] = path.parent / spec.only
    return read_source(where, job_id, **settings)

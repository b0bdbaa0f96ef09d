"""Where traces come from: a JSONL file of {trace_id, reasoning_trace, task_context, evidence,
expected_bias_profile} (a golden set adds `domain` and `reference` labels), or a finished run of
this tool, whose raw answers under a reasoning strategy (`cot`) are traces, each with its task.

Both give `Trace`s; reader.py turns them into a job with one judge call per trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from orchestrator.errors import UserError
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

FIELDS = ("trace_id", "reasoning_trace", "task_context", "evidence", "expected_bias_profile")
REASONING_STRATEGIES = ("cot",)  # a run's answers that are traces: under these, by default
# What of a run's records is audited: the reasoning the model showed apart from its answer
# (a reasoning model's own thinking: `response.reasoning`), or the answer text under a
# reasoning strategy; `auto`: the model's own reasoning wherever the run holds any.
TRACE_SOURCES = ("auto", "reasoning", "answer")
# The task context a run's trace is judged with: its own prompt, the mirror condition's prompt
# for the same item, or none (a control: the prompt carries the condition's anchor or framing).
CONTEXTS = ("own", "swapped", "none")
NO_MIRROR = "none (no mirror)"  # swapped asked, no mirror condition: the context is withheld
WITHHELD = "Withheld (a control: the task this reasoning answered is not shown)."


@dataclass(frozen=True)
class Trace:
    trace_id: str
    text: str
    context: str
    evidence: tuple[str, ...]
    profile: str
    domain: str = ""
    reference: dict[str, dict[str, Any]] = field(default_factory=dict)  # bias -> score/flag/step
    source: dict[str, str | int] = field(default_factory=dict)  # a run's task: where it came from


def _bad(path: Path, line: int, what: str, fix: str, name: str | None = None) -> UserError:
    where = f"line {line}" + (f", {name}" if name else "")
    return UserError(f"{where}: {what}", file=path, field=name, fix=fix)


def _reference(path: Path, n: int, value: Any) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, dict) or set(value) != set(BIAS_TYPES):
        raise _bad(
            path,
            n,
            "reference must give each of the four biases",
            "write reference = "
            "{"
            + ", ".join(f'"{b}": {{"score": 1-5, "flag": ..., "step": ...}}' for b in BIAS_TYPES)
            + "}",
            "reference",
        )
    out = {}
    for bias, label in value.items():
        score = label.get("score") if isinstance(label, dict) else None
        step = label.get("step") if isinstance(label, dict) else None
        if not (isinstance(score, int) and not isinstance(score, bool) and 1 <= score <= 5) or (
            step is not None and not (isinstance(step, int) and step >= 0)
        ):
            raise _bad(
                path,
                n,
                f"{bias}: needs an integer score 1-5 and a step index or null",
                'e.g. {"score": 2, "flag": true, "step": 1}',
                f"reference.{bias}",
            )
        out[bias] = {"score": score, "flag": score <= 2, "step": step}
    return out


def _trace(path: Path, n: int, obj: Any) -> Trace:
    if not isinstance(obj, dict):
        raise _bad(path, n, "not a JSON object", "write one object per line")
    missing = [f for f in FIELDS if f not in obj]
    if missing:
        raise _bad(
            path,
            n,
            f"missing {', '.join(missing)}",
            f"give every line: {', '.join(FIELDS)}",
            missing[0],
        )
    for name in ("trace_id", "reasoning_trace", "task_context", "expected_bias_profile"):
        if not isinstance(obj[name], str):
            raise _bad(path, n, "must be a string", f"write {name} as a JSON string", name)
    if not obj["trace_id"].strip():
        raise _bad(path, n, "is empty", "give every trace an id", "trace_id")
    evidence = obj["evidence"]
    if isinstance(evidence, str):
        evidence = [evidence] if evidence.strip() else []
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise _bad(
            path,
            n,
            "must be a list of strings (or one string)",
            'e.g. "evidence": ["fact one", "fact two"]',
            "evidence",
        )
    return Trace(
        obj["trace_id"],
        obj["reasoning_trace"],
        obj["task_context"],
        tuple(e for e in evidence if e.strip()),
        obj["expected_bias_profile"],
        str(obj.get("domain", "")),
        _reference(path, n, obj.get("reference")),
    )


def from_jsonl(path: Path) -> list[Trace]:
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise UserError(
            f"cannot read the traces file: {exc.strerror}", file=path, fix="check the path"
        ) from None
    traces, seen = [], {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise _bad(
                path, n, f"malformed JSON: {exc}", "write one JSON object per line"
            ) from None
        trace = _trace(path, n, obj)
        if trace.trace_id in seen:
            raise _bad(
                path,
                n,
                f"trace_id '{trace.trace_id}' is already used on line {seen[trace.trace_id]}",
                "give every trace its own id",
                "trace_id",
            )
        seen[trace.trace_id] = n
        traces.append(trace)
    if not traces:
        raise UserError(
            "the traces file holds no traces",
            file=path,
            fix="write one JSON object per line: " + ", ".join(FIELDS),
        )
    return traces


def mirror(index: int, conditions: int) -> int | None:
    """The condition whose task context a trace of condition `index` is judged with under
    `context = "swapped"`: first with last, second with second-to-last, so the two conditions
    the by-condition analysis compares (last - first) trade contexts. The middle one of an odd
    number has none to trade with."""
    other = conditions - 1 - index
    return None if other == index else other


def _cell_key(cell, condition: int | None) -> tuple:
    """A cell's item, strategy and model, in `condition`."""
    exp, strategy = cell.experiment.slug, cell.strategy.id
    return (cell.job.id, exp, condition, cell.variant.id, strategy, cell.model_key)


def _prompts(cells, strategies: tuple[str, ...] | None) -> dict[tuple, dict]:
    """Each reasoning cell's prompt by option order (all strategies': None), for the swapped
    context."""
    prompts: dict[tuple, dict] = {}
    for cell in cells:
        if strategies is None or cell.strategy.id in strategies:
            key = _cell_key(cell, cell.condition.index)
            prompts.setdefault(key, {}).setdefault(cell.order, cell.messages[-1]["content"])
    return prompts


def _context(cell, mode: str, prompts: dict[tuple, dict]) -> tuple[str, int | None]:
    """(the task context the judge sees, the source condition it comes from, None when
    withheld). "own": the task's own prompt; "swapped": the prompt of the same item, strategy
    and model in the mirror condition, in the same option order where there is one; "none", or
    no mirror to swap with: WITHHELD."""
    if mode == "own":
        return cell.messages[-1]["content"], cell.condition.index
    other = mirror(cell.condition.index, len(cell.experiment.conditions))
    found = prompts.get(_cell_key(cell, other), {}) if mode == "swapped" else {}
    if not found:
        return WITHHELD, None
    return found.get(cell.order, next(iter(found.values()))), other


def _texts(run_dir: Path, field: str, strategies: tuple[str, ...] | None) -> dict[str, str]:
    """Task id -> the non-empty `response[field]` of the run's answered tasks."""
    from orchestrator.engine.results import RESULTS
    from orchestrator.export import records as results

    texts = {}
    for task_id, status, _, _, rec in results(run_dir / RESULTS, terminal_only=True):
        text = (rec.get("response") or {}).get(field)
        if (
            status in ("ok", "parse_error")
            and (strategies is None or rec.get("strategy") in strategies)
            and isinstance(text, str)
            and text.strip()
        ):
            texts[task_id] = text
    return texts


def from_run(
    run_dir: Path,
    strategies: tuple[str, ...] | None = None,
    context: str = "own",
    source: str = "auto",
) -> list[Trace]:
    """The run's traces, each with the task it answered: the prompt as context (it holds the
    task's facts, and the condition's manipulation with them: the anchor, the framing), the
    experiment's bias as the profile (the same in every condition). `source` (TRACE_SOURCES):
    the models' own reasoning (under any strategy unless `strategies` says), or the answers
    under the reasoning strategies (default cot). `context` (CONTEXTS) swaps or withholds the
    prompt, a control for a difference between conditions that the context alone could make."""
    from orchestrator.engine.run_folder import campaign_of_run
    from orchestrator.plan import Plan

    campaign = campaign_of_run(run_dir)  # its jobs from the manifest: no study reads a file
    texts = _texts(run_dir, "reasoning", strategies) if source != "answer" else {}
    if source == "reasoning" and not texts:
        raise UserError(
            "the run holds no reasoning of a model's own (response.reasoning)",
            file=str(run_dir),
            field="traces",
            fix="run a reasoning model that shows its thinking (see docs: Reasoning models), "
            "or audit the answers under a reasoning strategy: --traces answer",
        )
    if texts:
        source = "reasoning"
    else:  # the answers under a reasoning strategy
        source, strategies = "answer", strategies or REASONING_STRATEGIES
        known = {s.id for job in campaign.jobs for s in campaign.strategies_for(job)}
        if not set(strategies) & known:
            raise UserError(
                f"the run has no task under the strategies {', '.join(strategies)}, and no "
                "model of it showed its own reasoning",
                file=str(run_dir),
                field="strategies",
                fix=f"run it with a reasoning strategy (one of {', '.join(sorted(known))}) or "
                "a reasoning model, or name its strategies in an audit job file",
            )
        texts = _texts(run_dir, "raw", strategies)
    traces = []
    labels = {m.key: m.label for m in campaign.config.models}
    plan = Plan(campaign)
    prompts = _prompts(plan.cells, strategies) if context == "swapped" else {}
    for task in plan.tasks():
        text = texts.get(task.task_id)
        if text is None:
            continue
        cell = task.cell
        shown, shown_condition = _context(cell, context, prompts)
        source_fields: dict[str, str | int] = {
            "source_run": str(run_dir),
            "source_task": task.task_id,
            "source_job": cell.job.id,
            "source_experiment": cell.experiment.slug,
            "source_condition": cell.condition.index,
            "source_condition_label": cell.condition.label,
            "source_strategy": cell.strategy.id,
            "source_model": labels[cell.model_key],
            "source_sample": task.sample,
            # the item: its samples and option orders are one unit of the analysis
            "source_item": str((cell.variant.item or {}).get("group", cell.variant.id)),
        }
        if source == "reasoning":  # an answer's item stays as it was, and so do its runs
            source_fields["source_trace"] = "reasoning"
        if context != "own":  # an own-context item stays as it was, and so do its runs
            source_fields["context_mode"] = context
            if shown_condition is not None:
                source_fields["context_condition"] = shown_condition
            elif context == "swapped":  # the middle condition of an odd number: none to trade
                source_fields["context_mode"] = NO_MIRROR
        traces.append(
            Trace(
                task.task_id,
                text,
                shown,
                (),
                f"The task probes {cell.experiment.bias_label}.",
                cell.variant.domain,
                source=source_fields,
            )
        )
    if not traces:
        raise UserError(
            "the run holds no answered task of its plan under the strategies "
            + ", ".join(strategies or ("any",)),
            file=str(run_dir),
            fix=f"finish the run first: orchestrator run {run_dir}",
        )
    return sorted(traces, key=lambda t: t.trace_id)

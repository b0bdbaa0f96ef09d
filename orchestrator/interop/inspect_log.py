"""`export --format inspect`: one Inspect eval log per job and model identity, written through
inspect_ai's own Python API (the `.eval` format is not a frozen spec: never written by hand), so
that `inspect view` and `inspect_ai.log.read_eval_log` open a campaign's results.

Each sample is one task's final record: its input messages, the model's answer as its output
(the trace as reasoning content, where kept; a task without an answer is an errored sample), the parsed answer as the `parsed` score (the
choice, else the value; none when nothing was parsed), and the design as metadata. Needs the
optional extra: pip install 'bias-orchestrator[inspect]'.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator.engine.names import model_key
from orchestrator.errors import UserError
from orchestrator.interop.records import final_table

SCORE = "parsed"  # the score each sample carries: what was parsed of the model's answer


def _inspect():
    try:
        import inspect_ai.log as log
        import inspect_ai.model as model
        import inspect_ai.scorer as scorer
    except ImportError:
        raise UserError(
            "export --format inspect needs inspect_ai, which is not installed",
            field="--format",
            fix="pip install 'bias-orchestrator[inspect]' (or pip install inspect_ai)",
        ) from None
    return log, model, scorer


def export_inspect(run_dir: Path, out_dir: Path, manifest: dict[str, Any]) -> dict[Path, int]:
    log, model, scorer = _inspect()
    table = final_table(run_dir)
    if not table.height:
        return {}
    written: dict[Path, int] = {}
    labels = manifest.get("models", {})
    for (job, key), rows in table.group_by("job", "modelKey", maintain_order=True):
        samples = [_sample(r, log, model, scorer) for r in rows.iter_rows(named=True)]
        first = rows.row(0, named=True)
        name = f"{first['provider']}/{first['model']}"
        spec = log.EvalSpec(
            created=manifest["createdAt"],
            task=str(job),
            task_id=str(job),
            eval_id=f"{manifest['runId']}-{job}-{key}",
            run_id=manifest["runId"],
            dataset=log.EvalDataset(name=str(job), samples=len(samples)),
            model=name,
            config=log.EvalConfig(),
            metadata={
                "campaign": manifest["campaign"],
                "modelKey": key,
                "model": labels.get(key, name),
                "software": f"bias-orchestrator {manifest.get('software', '')}",
            },
        )
        scored = [s for s in samples if s.scores]
        eval_log = log.EvalLog(
            status="success",
            eval=spec,
            plan=log.EvalPlan(),
            results=log.EvalResults(
                total_samples=len(samples),
                completed_samples=sum(s.error is None for s in samples),
                scores=[
                    log.EvalScore(name=SCORE, scorer=SCORE, scored_samples=len(scored), metrics={})
                ],
            ),
            stats=log.EvalStats(
                started_at=str(rows["startedAt"].min() or ""),
                completed_at=str(rows["finishedAt"].max() or ""),
            ),
            samples=samples,
        )
        key = model_key(key, str(run_dir / "results.ndjson"))
        path = out_dir / f"{_slug(str(job))}__{_slug(labels.get(key, name))}__{key}.eval"
        written[_write_log(log, eval_log, path)] = len(samples)
    return written


def _write_log(log: Any, eval_log: Any, path: Path) -> Path:
    """inspect_ai writes to a path, following a link there: it writes in a private temporary
    folder, and the file is copied into place by the one writer (engine/files.py)."""
    import shutil
    import tempfile

    from orchestrator.engine.files import write_file

    with tempfile.TemporaryDirectory(prefix="orchestrator-") as tmp:
        made = Path(tmp) / path.name
        log.write_eval_log(eval_log, str(made), format="eval")
        with open(made, "rb") as src:
            return write_file(
                path, lambda f: shutil.copyfileobj(src, f, 1 << 20), within=path.parent
            )


def _sample(r: dict[str, Any], log: Any, model: Any, scorer: Any) -> Any:
    kinds = {
        "system": model.ChatMessageSystem,
        "user": model.ChatMessageUser,
        "assistant": model.ChatMessageAssistant,  # a few-shot example's answer
    }
    messages = [
        kinds.get(m["role"], model.ChatMessageUser)(content=m["content"])
        for m in r["messages"] or []
    ]
    answer = r["answer"] or ""
    content = (  # the model's trace, where kept, as reasoning beside the answer
        [model.ContentReasoning(reasoning=r["reasoning"]), model.ContentText(text=answer)]
        if r["reasoning"]
        else answer
    )
    output = model.ModelOutput.from_content(f"{r['provider']}/{r['model']}", content)
    if r["promptTokens"] is not None or r["completionTokens"] is not None:
        output.usage = model.ModelUsage(
            input_tokens=r["promptTokens"] or 0,
            output_tokens=r["completionTokens"] or 0,
            total_tokens=(r["promptTokens"] or 0) + (r["completionTokens"] or 0),
            reasoning_tokens=r["reasoningTokens"],
        )
    parsed = r["choice"] if r["choice"] is not None else r["value"]
    scores = (
        {SCORE: scorer.Score(value=parsed, answer=str(parsed), explanation=r["reason"])}
        if parsed is not None
        else {}
    )
    return log.EvalSample(
        id=r["taskId"],
        epoch=1,
        input=messages or "",
        target="",
        messages=[*messages, output.message] if messages else [output.message],
        output=output,
        scores=scores,
        metadata={
            "taskId": r["taskId"],
            "status": r["status"],
            "experiment": r["experimentSlug"],
            "condition": r["conditionIndex"],
            "variant": r["variant"],
            "strategy": r["strategy"],
            "sample": r["sample"],
            "optionOrder": r["optionOrder"],
            "role": r["role"],
            "costUsd": r["costUsd"],
            "servedModel": r["servedModel"],
            "error": r["error"],
        },
        # a task with no answer (failed for good this far, or a request the server refused as
        # too long) is an errored sample, as Inspect shows one
        error=log.EvalError(message=r["error"] or r["status"], traceback="", traceback_ansi="")
        if r["status"] in ("failed", "too_long")
        else None,
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "model"

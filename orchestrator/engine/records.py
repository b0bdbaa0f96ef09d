"""One result record per finished task: the seed-000 fields plus the product's own."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from orchestrator.formats import FIELD, RUN_FORMAT
from orchestrator.parse import Parsed
from orchestrator.plan import Cell, Task
from orchestrator.pricing import usage_cost
from orchestrator.providers.base import Completion


@dataclass(slots=True)
class Outcome:
    status: str
    attempts: int
    latency_ms: float
    started: datetime
    finished: datetime
    completion: Completion | None = None
    parsed: Parsed | None = None
    error: str | None = None
    extracted_by: str | None = None  # the extractor model that stated the answer, if one did
    extra_cost: float = (
        0.0  # USD for a helper model's calls (extractor, screener), part of the cost
    )
    response: dict[str, Any] | None = None  # fields a study's own routine adds to the response
    batch_id: str | None = None  # the provider's batch it came back in (batch mode)


def now() -> datetime:
    return datetime.now(UTC)


@functools.lru_cache(maxsize=65_536)
def _cell_fields(cell: Cell) -> tuple[dict[str, Any], dict[str, Any]]:
    """The parts of a record that are the same for every sample of a cell (built once)."""
    model = cell.model
    head = {
        "modelKey": cell.model_key,
        "caseId": f"{cell.experiment.slug}:{cell.condition.index}",
        "experimentSlug": cell.experiment.slug,
        "conditionIndex": cell.condition.index,
    }
    model_fields = {
        "provider": model.provider,
        "name": model.name,
        "version": model.version,
        "temperature": model.temperature,
        "topP": model.top_p,
        "date": None,
        "maxTokens": model.max_tokens,
        "seed": model.seed,
        "structuredOutput": model.structured_output,
        # only when set, so the records of every other model stay as they were
        **({"reasoningEffort": model.reasoning_effort} if model.reasoning_effort else {}),
        **({"thinkingBudget": model.thinking_budget} if model.thinking_budget is not None else {}),
    }
    return head, model_fields


def task_cost(
    cell: Cell, completion: Completion | None, extra: float, batch: bool = False
) -> float | None:
    """USD of the task's calls, at the batch price when it came back in a batch; an answer from
    the response cache was paid in another run."""
    if completion is not None and completion.cached_from is not None:
        return extra
    main = usage_cost(cell.model.price_for(batch), completion.usage) if completion else None
    return main + extra if main is not None else (extra or None)


def head_order(cell: Cell) -> list[str] | None:
    """The option roles in the order the prompt showed them (counterbalanced jobs)."""
    if cell.order is None:
        return None
    roles = cell.contract.roles or cell.contract.options
    return [roles[i] for i in cell.order]


def make_record(task: Task, outcome: Outcome) -> dict[str, Any]:
    cell = task.cell
    head, model_fields = _cell_fields(cell)
    completion = outcome.completion
    response: dict[str, Any] = {}
    parsed = outcome.parsed
    if parsed is not None and parsed.ok:
        if parsed.value is not None:
            response["value"] = parsed.value
        if parsed.choice is not None:
            response["choice"] = parsed.choice
            roles = cell.contract.roles
            if roles and cell.contract.kind == "choice":  # scored by what it is, not where it stood
                response["role"] = roles[cell.contract.options.index(parsed.choice)]
        if parsed.reason is not None:
            response["reason"] = parsed.reason
    served = fingerprint = None
    if completion is not None and completion.scores is not None:
        response["mode"] = "score"  # chosen by DC-PMI over these, not written by the model
        response["scores"] = completion.scores
    if outcome.response:
        response.update(outcome.response)
    if completion is not None:
        response["raw"] = completion.text
        if completion.reasoning is not None:  # the model's own trace, never mixed into raw
            response["reasoning"] = completion.reasoning
        served = completion.served_model
        fingerprint = completion.system_fingerprint
    model = dict(model_fields)
    if completion is not None and completion.max_tokens_param is not None:
        model["maxTokensParam"] = completion.max_tokens_param  # a reasoning model's request
    model["version"] = model["version"] or served or cell.model.name
    model["date"] = outcome.finished.date()  # orjson writes dates and datetimes as ISO 8601
    # taskId, status and modelKey lead the line: the resume scan reads them without parsing JSON.
    return {
        "taskId": task.task_id,
        "status": outcome.status,
        **head,
        "sample": task.sample,
        "model": model,
        "response": response,
        "job": cell.job.id,
        "variant": cell.variant.id,
        "strategy": cell.strategy.id,
        "optionOrder": head_order(cell),
        "attempts": outcome.attempts,
        "latencyMs": round(outcome.latency_ms, 1),
        "usage": completion.usage if completion else None,
        "costUsd": task_cost(cell, completion, outcome.extra_cost, outcome.batch_id is not None),
        "servedModel": served,
        "systemFingerprint": fingerprint,  # a silent model update shows here (compare flags it)
        "error": outcome.error,
        "extractedBy": outcome.extracted_by,
        "cachedFrom": completion.cached_from if completion else None,  # the run that paid for it
        "startedAt": outcome.started,
        "finishedAt": outcome.finished,
        "batchId": outcome.batch_id,
        "endpoint": completion.endpoint if completion else None,  # the pool's server that answered
        FIELD: RUN_FORMAT,  # last: the resume scan reads the line's head without parsing it
    }

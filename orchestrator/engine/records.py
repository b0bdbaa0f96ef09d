"""One result record per finished task: the seed-000 fields plus the product's own."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from orchestrator.parse import Parsed
from orchestrator.plan import Task
from orchestrator.providers.base import Completion

DONE_STATUSES = ("ok", "parse_error", "refused")  # "failed" is retried on resume


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


def now() -> datetime:
    return datetime.now(timezone.utc)


def make_record(task: Task, outcome: Outcome) -> dict[str, Any]:
    cell, model = task.cell, task.cell.model
    completion = outcome.completion
    response: dict[str, Any] = {}
    if outcome.parsed is not None and outcome.parsed.ok:
        if outcome.parsed.choice is not None:
            response["choice"] = outcome.parsed.choice
        else:
            response["value"] = outcome.parsed.value
    if completion is not None:
        response["raw"] = completion.text
    served = completion.served_model if completion else None
    # taskId, status and modelKey lead the line: the resume scan reads them without parsing JSON.
    return {
        "taskId": task.task_id,
        "status": outcome.status,
        "modelKey": model.key,
        "caseId": f"{cell.experiment.slug}:{cell.condition.index}",
        "experimentSlug": cell.experiment.slug,
        "conditionIndex": cell.condition.index,
        "sample": task.sample,
        "model": {"provider": model.provider, "name": model.name,
                  "version": model.version or served or model.name,
                  "temperature": model.temperature, "topP": model.top_p,
                  "date": outcome.finished.date().isoformat(),
                  "maxTokens": model.max_tokens, "seed": model.seed},
        "response": response,
        "job": cell.job.id,
        "variant": cell.variant.id,
        "strategy": cell.strategy.id,
        "attempts": outcome.attempts,
        "latencyMs": round(outcome.latency_ms, 1),
        "usage": completion.usage if completion else None,
        "servedModel": served,
        "error": outcome.error,
        "startedAt": outcome.started.isoformat(),
        "finishedAt": outcome.finished.isoformat(),
    }

"""A study's own call routine: for tasks whose answer takes more than one call (the trace audit:
a screening call, the judge, one retry with the validation error), the study writes the steps and
the engine gives it a `Caller`. Every call still passes the key's rate gate and the retries of
calls.py, and the caller sums usage and attempts over them, so the task's record counts and
prices them all. A routine returns its status and the fields it adds to the record's response.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrator.engine.calls import call_with_retries
from orchestrator.engine.limits import KeyController
from orchestrator.plan import Task
from orchestrator.pricing import usage_cost
from orchestrator.providers.base import Completion, Provider
from orchestrator.spec.campaign import ModelConfig
from orchestrator.spec.models import ResponseContract

Messages = tuple[dict[str, str], ...]


@dataclass
class Helper:
    """A second model a campaign names for its tasks (the extractor, the screener), with the
    rate controller of its limit key, which the engine gives it (shared with the key's models)."""

    model: ModelConfig
    provider: Provider
    gate: KeyController | None = None

    async def ask(
        self,
        task: Task,
        messages: Messages,
        on_retry: Callable[[], None],
        contract: ResponseContract | None = None,
    ) -> tuple[Completion, float]:
        """Its answer to these messages about a task (under `contract` if given: another answer
        format than the task's), and what it cost (USD at its own price; 0 without one)."""
        cell = task.cell
        changes: dict[str, Any] = {
            "model": self.model,
            "model_key": self.model.key,
            "messages": messages,
            "cacheable": False,
        }
        if contract is not None:
            changes["variant"] = cell.variant.model_copy(update={"contract": contract})
        asked = Task(task.task_id, dataclasses.replace(cell, **changes), task.sample)
        completion, _ = await call_with_retries(self.provider, self.gate, asked, on_retry)
        if completion.cached_from is not None:  # paid in an earlier run
            return completion, 0.0
        return completion, usage_cost(self.model.price, completion.usage) or 0.0


@dataclass
class RoutineResult:
    status: str  # ok / parse_error / skipped, as any record's
    response: dict[str, Any]  # fields added to the record's `response`
    text: str | None = None  # the last model text, kept as `response.raw`
    error: str | None = None


def add_usage(total: dict[str, int] | None, usage: dict[str, int] | None) -> dict[str, int] | None:
    """Token counts of several calls of one task, summed key by key (a count one call lacks is 0)."""
    if usage is None:
        return total
    if total is None:
        return dict(usage)
    return {k: (total.get(k) or 0) + (usage.get(k) or 0) for k in {**total, **usage}}


@dataclass
class Caller:
    provider: Provider
    gate: KeyController
    task: Task
    on_retry: Callable[[], None]
    screener: Helper | None = None
    usage: dict[str, int] | None = None  # the task's model's calls, summed
    attempts: int = 0
    served: str | None = None
    fingerprint: str | None = None
    endpoint: str | None = None  # the pool's server that answered the last call
    extra_cost: float = 0.0  # USD of the screener's calls (its own price)
    calls: int = field(default=0)
    cached_from: str | None = None  # a run that paid for one of its calls, from the cache
    paid: int = 0  # calls this run paid for (model and screener): cached only while none was
    log: dict[str, Any] = field(default_factory=dict)  # the routine's record fields so far

    def completion(self, text: str | None) -> Completion | None:
        """The task's completion for its record: the last text, with every call's usage."""
        if text is None and not self.calls:
            return None
        return Completion(
            text,
            usage=self.usage,
            served_model=self.served,
            system_fingerprint=self.fingerprint,
            endpoint=self.endpoint,
            cached_from=None if self.paid else self.cached_from,
        )

    def _count(self, completion: Completion) -> None:
        self.cached_from = completion.cached_from or self.cached_from
        self.paid += completion.cached_from is None

    async def ask(self, messages: Messages) -> Completion:
        """The task's model on these messages (the task's own, or a retry's)."""
        task = Task(
            self.task.task_id,
            dataclasses.replace(self.task.cell, messages=messages, cacheable=False),
            self.task.sample,
        )
        completion, attempts = await call_with_retries(
            self.provider, self.gate, task, self.on_retry
        )
        self.usage, self.attempts = (
            add_usage(self.usage, completion.usage),
            self.attempts + attempts,
        )
        self.served, self.calls = completion.served_model or self.served, self.calls + 1
        self.fingerprint = completion.system_fingerprint or self.fingerprint
        self.endpoint = completion.endpoint or self.endpoint
        self._count(completion)
        return completion

    async def screen(self, messages: Messages, contract: ResponseContract) -> Completion | None:
        """The campaign's screener on these messages, or None when it has none."""
        if self.screener is None:
            return None
        completion, cost = await self.screener.ask(self.task, messages, lambda: None, contract)
        self.extra_cost += cost
        self._count(completion)
        return completion


class Routine(Protocol):
    async def __call__(self, caller: Caller) -> RoutineResult: ...

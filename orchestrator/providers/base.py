"""The one small interface between the engine and a model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from orchestrator.providers.errors import RateInfo

if TYPE_CHECKING:
    from orchestrator.plan import Task


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    usage: dict[str, int] | None = None
    served_model: str | None = None  # the model string the provider says it served
    system_fingerprint: str | None = None  # the backend build, where the provider names it
    finish_reason: str | None = None
    rate: RateInfo | None = None  # what the server said about its remaining quota
    logprob: float | None = None  # a scoring call: log P(continuation | text)
    scores: tuple[dict, ...] | None = None  # a scored answer: each option's log-probabilities
    cached_from: str | None = None  # the run that paid for it, when the response cache answered
    endpoint: str | None = None  # which server of an endpoint pool answered (providers/pool.py)
    reasoning: str | None = None  # what the model showed of its thinking, apart from its answer
    max_tokens_param: str | None = None  # the request's name for max_tokens, when not that


class Provider(Protocol):
    """Takes a task, returns its completion, or raises one of providers.errors.

    start() runs once before the first call (a local server boots there); aclose() always runs
    at the end, also after an error or a signal."""

    async def start(self) -> None: ...

    async def complete(self, task: Task) -> Completion: ...

    async def score(self, task: Task, text: str, continuation: str) -> Completion:
        """log P(continuation | text), summed over the continuation's tokens, as `logprob`
        (providers that can: see SCORING_PROVIDERS)."""
        ...

    async def aclose(self) -> None: ...

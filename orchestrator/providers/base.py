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
    served_model: str | None = None
    finish_reason: str | None = None
    rate: RateInfo | None = None  # what the server said about its remaining quota


class Provider(Protocol):
    """Takes a task, returns its completion, or raises one of providers.errors.

    start() runs once before the first call (a local server boots there); aclose() always runs
    at the end, also after an error or a signal."""

    async def start(self) -> None: ...

    async def complete(self, task: Task) -> Completion: ...

    async def aclose(self) -> None: ...

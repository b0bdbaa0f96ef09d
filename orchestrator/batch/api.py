"""The one small interface between the batch runner and a provider's batch API.

The runner writes a batch's requests to a JSONL file in the run folder (one `line(task)` each),
records its intent in the journal, then calls `submit`; it polls until the batch has ended and
reads its items. Every network step may be cut short by a crash: `find` says whether a batch
named `name` reached the provider after all, so a resumed run polls it instead of paying twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from orchestrator.plan import Task
from orchestrator.providers.base import Completion


@dataclass(frozen=True)
class BatchLimits:
    """What one batch may hold, as the provider states it."""

    max_requests: int
    max_bytes: int  # of the submitted input (the JSONL file, or the request body)


@dataclass
class Submitted:
    batch_id: (
        str  # the provider's id (OpenAI batch_..., Anthropic msgbatch_..., Gemini batches/...)
    )
    file_id: str | None = None  # OpenAI: the uploaded input file


@dataclass
class Progress:
    state: str  # the provider's own word: in_progress, ended, BATCH_STATE_RUNNING, ...
    ended: bool  # nothing more will happen to it: its items can be read
    counts: dict[str, int] = field(default_factory=dict)  # the provider's own request counts
    error: str | None = None  # why the whole batch failed (OpenAI validation), if it did


@dataclass
class Item:
    """One request's outcome: a completion read as the online protocol reads a 200 answer, or
    the error an online call would have raised (providers.errors: Refused and TooLong are final;
    Transient, RateLimited and an expired item go back to pending; Fatal stops the model)."""

    custom_id: str
    completion: Completion | None = None
    error: Exception | None = None


class Unconfirmed(Exception):
    """The batch may have been created (the request failed on the way back) and the provider
    keeps no name to find it by: the run tells it by its results (settle.py)."""


class BatchAPI(Protocol):
    limits: BatchLimits
    turnaround: str  # what the provider promises, for the plan ("within 24 hours")
    names_batches: bool  # whether find() finds a batch by its name (else by size: Anthropic)

    def line(self, task: Task) -> bytes:
        """The task's request as one entry of the batch input, without a newline (its custom id
        is the task id)."""
        ...

    async def submit(
        self,
        name: str,
        path: Path,
        count: int,
        on_uploaded: Callable[[str], None],
        known: frozenset[str] = frozenset(),
    ) -> Submitted:
        """Send the `count` entries in `path` as one batch named `name` (OpenAI: upload the file,
        call on_uploaded(file id), then create the batch). `known`: the run's batches, never
        taken for this one when a failed create request is looked up. Raises Unconfirmed when
        the create request failed and a batch of this size may be it."""
        ...

    async def find(
        self, name: str, since: datetime, count: int, exclude: frozenset[str] = frozenset()
    ) -> list[str]:
        """The ids of the batches that may be the one named `name`, created at or after `since`
        and not in `exclude`: one or none where the provider keeps the name; where it keeps
        none (Anthropic), every batch of `count` requests created since then."""
        ...

    async def poll(self, batch_id: str) -> Progress: ...

    def items(self, batch_id: str) -> AsyncIterator[Item]:
        """An ended batch's items, streamed (a batch may hold 100,000)."""
        ...

    async def cancel(self, batch_id: str) -> None: ...

    async def forget_input(self, file_id: str | None) -> bool:
        """Delete the batch's uploaded input file at the provider, once its batch is collected
        (OpenAI keeps it, and every prompt in it, until it is deleted); False if the provider
        has no such file (deleted already, or uploaded with another key)."""
        ...

    async def aclose(self) -> None: ...

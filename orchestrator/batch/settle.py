"""After a crash, or a create request that failed on the way back: the batches whose creation
is unconfirmed (an intent in the journal, no provider id) are looked up at the provider, never
submitted a second time while they may exist.

A provider that keeps our name for a batch (OpenAI's metadata, Gemini's display name) names at
most one candidate, and it is ours. Anthropic keeps none: every batch of that many requests
created since the intent, but those the run already knows, is a candidate, and the one whose
results hold the intent's tasks is ours. That shows only once a candidate has ended, so until
then the intent stays open and its tasks in flight (two models of one size submit batches of
one size: taking the first candidate could take the other model's). No candidate at all: the
batch never arrived, and its tasks are pending again.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import aclosing

from orchestrator.batch.api import BatchAPI
from orchestrator.batch.inputs import delete_input
from orchestrator.batch.journal import Batch, Journal


async def settle(journal: Journal, key: str, api: BatchAPI, say: Callable[[str], None]) -> int:
    """The tasks of the batches found never to have arrived: pending again."""
    abandoned = 0
    for batch in journal.open_batches(key):
        if batch.batch_id is not None:
            continue
        candidates = await api.find(
            batch.name, batch.submitted_at, len(batch.tasks), journal.known_ids()
        )
        if candidates and not api.names_batches:
            found = await _ours(batch, candidates, api)
            if found is None:  # not all ended yet
                if batch.state != "unconfirmed":
                    say(
                        f"{len(candidates)} batch(es) of {len(batch.tasks):,} requests were made "
                        f"since {batch.name} was sent; waiting for their results to tell which "
                        "is it"
                    )
                    journal.state(batch, "unconfirmed", {})
                continue
            candidates = [found] if found else []
        if candidates:
            journal.created(batch, candidates[0])
            say(
                f"found batch {candidates[0]} ({batch.name}), whose creation was not confirmed; "
                "polling it"
            )
        else:
            journal.abandoned(batch)
            abandoned += len(batch.tasks)
            await delete_input(journal, api, batch, say)  # uploaded, though never created
    return abandoned


async def _ours(batch: Batch, candidates: list[str], api: BatchAPI) -> str | None:
    """The ended candidate whose first result is one of the batch's tasks; None while none is
    and one has not ended; "" when all have ended and none is."""
    tasks, waiting = set(batch.tasks), False
    for candidate in candidates:
        if not (await api.poll(candidate)).ended:
            waiting = True
            continue
        async with aclosing(api.items(candidate)) as items:
            async for item in items:
                if item.custom_id in tasks:
                    return candidate
                break
    return None if waiting else ""

"""After a crash: the batches whose creation was cut short (an intent in the journal, no
provider id) are looked up at the provider, never submitted a second time while they may exist.

A provider that keeps our name for a batch (OpenAI's metadata, Gemini's display name) names at
most one candidate. Anthropic keeps none: every batch of that many requests created since the
intent is a candidate, but those the run already knows. One candidate is ours; several (two
models of one size submitted together) are told apart by their results' custom ids once they
have ended, and until then the intent stays open, its tasks in flight; none means the batch never
arrived, and its tasks are pending again.
"""
from __future__ import annotations

from collections.abc import Callable

from orchestrator.batch.api import BatchAPI
from orchestrator.batch.journal import Batch, Journal


async def settle(journal: Journal, key: str, api: BatchAPI, say: Callable[[str], None]) -> None:
    for batch in journal.open_batches(key):
        if batch.batch_id is not None:
            continue
        known = frozenset(b.batch_id for b in journal.batches.values() if b.batch_id)
        candidates = await api.find(batch.name, batch.submitted_at, len(batch.tasks), known)
        if len(candidates) > 1:
            found = await _ours(batch, candidates, api)
            if found is None:
                if batch.state != "unconfirmed":
                    say(f"{len(candidates)} batches of {len(batch.tasks):,} requests were made at "
                        f"the provider when the last run stopped; waiting for their results to tell "
                        f"which is {batch.name}")
                    journal.state(batch, "unconfirmed", {})
                continue
            candidates = [found] if found else []
        if candidates:
            journal.created(batch, candidates[0])
            say(f"found batch {candidates[0]} ({batch.name}), sent before the last run stopped; "
                "polling it")
        else:
            journal.abandoned(batch)


async def _ours(batch: Batch, candidates: list[str], api: BatchAPI) -> str | None:
    """The candidate whose first result is one of the batch's tasks; "" when all have ended and
    none is; None while one of them has not ended."""
    tasks = set(batch.tasks)
    for candidate in candidates:
        if not (await api.poll(candidate)).ended:
            return None
        async for item in api.items(candidate):
            if item.custom_id in tasks:
                return candidate
            break
    return ""

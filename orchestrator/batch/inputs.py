"""Uploaded batch input files at the provider (OpenAI keeps each, and every prompt in it, until it
is deleted): deleted once their batch is closed (collected, or abandoned because it was never
created). The journal says which are deleted, so those a crash, a failed delete or an
abandoned creation left are deleted by the next run, before anything else."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio

from orchestrator.batch.api import BatchAPI
from orchestrator.batch.journal import JOURNAL, Batch, Journal
from orchestrator.providers.base import Provider
from orchestrator.providers.errors import ProviderError
from orchestrator.providers.http import HTTPProvider


async def delete_input(
    journal: Journal, api: BatchAPI, batch: Batch, say: Callable[[str], None]
) -> bool | None:
    """Delete a closed batch's input at the provider, and journal it: True, or False when the
    provider had no such file (journalled all the same: asking again would not find it). A
    failure is said, never a reason to stop (the batch's answers are on disk), and the next
    run tries again: None."""
    if not batch.file_id or batch.input_deleted:
        return True
    try:
        deleted = await api.forget_input(batch.file_id)
    except ProviderError as exc:
        say(
            f"could not delete the input file {batch.file_id} of batch "
            f"{batch.batch_id or batch.name} at the provider ({exc}); the next run tries again"
        )
        return None
    journal.input_deleted(batch)
    return deleted


def delete_leftovers(
    run_dir: Path, providers: dict[str, Provider], say: Callable[[str], None]
) -> None:
    """The inputs of closed batches still at the provider, deleted now (also by a run with no
    task left). After a model's first failure its other leftovers wait for the next run (the
    provider or the network is down: each would wait out its retries)."""
    if not (run_dir / JOURNAL).exists():
        return
    journal = Journal(run_dir)
    http = {k: p for k, p in providers.items() if isinstance(p, HTTPProvider)}
    left = [b for b in journal.leftover_inputs() if b.model_key in http]
    if not left:
        return
    from orchestrator.batch.clients import batch_api

    async def delete_all() -> None:
        apis: dict[str, BatchAPI] = {}
        failed: set[str] = set()
        gone = 0
        try:
            for batch in left:
                key = batch.model_key
                if key in failed:
                    continue
                if key not in apis:
                    apis[key] = batch_api(http[key])
                deleted = await delete_input(journal, apis[key], batch, say)
                if deleted is None:
                    failed.add(key)
                gone += deleted is False
        finally:
            for api in apis.values():
                await api.aclose()
        if gone:
            say(
                f"{gone} batch input file(s) the run had not yet deleted were not found at the "
                "provider: deleted before, or uploaded with another API key (if the key "
                "changed, delete them in that account)"
            )

    anyio.run(delete_all)

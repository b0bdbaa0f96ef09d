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
) -> None:
    """Delete a closed batch's input at the provider, and journal it; a failure is said, never
    a reason to stop (the batch's answers are on disk), and the next run tries again."""
    if not batch.file_id or batch.input_deleted:
        return
    try:
        await api.forget_input(batch.file_id)
    except ProviderError as exc:
        say(
            f"could not delete the input file {batch.file_id} of batch "
            f"{batch.batch_id or batch.name} at the provider ({exc}); the next run tries again"
        )
        return
    journal.input_deleted(batch)


def delete_leftovers(
    run_dir: Path, providers: dict[str, Provider], say: Callable[[str], None]
) -> None:
    """The inputs of closed batches still at the provider, deleted now (also by a run with no
    task left)."""
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
        try:
            for batch in left:
                if batch.model_key not in apis:
                    apis[batch.model_key] = batch_api(http[batch.model_key])
                await delete_input(journal, apis[batch.model_key], batch, say)
        finally:
            for api in apis.values():
                await api.aclose()

    anyio.run(delete_all)

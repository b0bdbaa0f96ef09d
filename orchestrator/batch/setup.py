"""Which models of a run go through batch APIs, and what refuses batch mode before anything is
written."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from orchestrator.batch.journal import Journal
from orchestrator.batch.runner import BatchSide
from orchestrator.cache.provider import CachedProvider
from orchestrator.cache.session import RunCache
from orchestrator.engine.extract import Extractor
from orchestrator.engine.state import RunState
from orchestrator.errors import UserError
from orchestrator.plan import Plan
from orchestrator.providers.base import Provider
from orchestrator.spec.campaign import Campaign, ModelConfig
from orchestrator.spec.provider_checks import BATCH_PROVIDERS


def why_online(model: ModelConfig, campaign: Campaign, multi_call: set[str]) -> str | None:
    """Why `run --batch` leaves this model online, or None when it can be batched.
    `multi_call`: the contract kinds whose tasks a study calls itself (several calls each)."""
    if not model.has_batch_api:
        return "no batch API"
    if model.answers == "score":
        return 'answers = "score" (the batch APIs return no prompt log-probabilities)'
    if model.base_urls:
        return "it is served by an endpoint pool (base_urls), not by its provider's batch API"
    if any(
        v.contract.kind in multi_call
        for job in campaign.jobs
        for e in job.experiments
        for c in e.conditions
        for v in c.variants
    ):
        return "its jobs make several calls per task"
    return None


def batch_everything(campaign: Campaign, console: Console, multi_call: set[str]) -> None:
    """run --batch: every model that can be batched runs in batch mode; the others say why not."""
    models, batched = campaign.config.models, []
    for m in models:
        why = why_online(m, campaign, multi_call)
        if why is not None:
            console.print(f"--batch: {escape(m.label)} runs online: {why}", highlight=False)
        batched.append(m.model_copy(update={"batch": True}) if why is None else m)
    if not any(m.batch for m in batched):
        raise UserError(
            "--batch: no model of this campaign can run in batch mode",
            field="--batch",
            fix=f"batch mode is for providers {', '.join(BATCH_PROVIDERS)} (generated "
            "answers, one call per task); drop --batch",
        )
    campaign.config = campaign.config.model_copy(update={"models": batched})


def check_batchable(plan: Plan, multi_call: set[str]) -> None:
    """A task whose study makes its own calls (several per task, each depending on the last:
    the `multi_call` contract kinds) cannot be one line of a batch."""
    for i, model in enumerate(plan.campaign.config.models):
        if not model.batch:
            continue
        cell = next(
            (c for c in plan.cells if c.model_index == i and c.contract.kind in multi_call), None
        )
        if cell is not None:
            raise UserError(
                f"job {cell.job.id} makes several calls per task ({cell.contract.kind}), "
                "which a batch cannot hold",
                file=str(plan.campaign.source),
                field=f"models[{i}].batch",
                fix="set batch = false for this model, or run that job in another campaign",
            )


def batch_side(
    plan: Plan,
    run_dir: Path,
    active: dict[str, Provider],
    done: set[str],
    state: RunState,
    console: Console,
    wait: bool,
    extractor: Extractor | None,
    cache: RunCache,
) -> BatchSide | None:
    """The batch side of this run: models in batch mode, and any model with batches still in
    flight (collected even when it is now online, so that nothing is paid for twice)."""
    journal = Journal(run_dir)
    for batch in journal.open_batches():  # written, but a crash came before `collected`
        if batch.batch_id and done.issuperset(batch.tasks):
            journal.collected(batch, batch.state, 0, 0)
    in_flight = {b.model_key for b in journal.open_batches()}
    submit = {m.key for m in plan.campaign.config.models if m.batch and m.key in active}
    keys = submit | (in_flight & set(active))
    if not keys:
        return None
    from orchestrator.batch.clients import batch_api

    apis = {key: batch_api(active[key]) for key in keys}
    say = lambda text: console.print(escape(text), highlight=False)  # noqa: E731
    caches = {
        k: p
        for k, p in cache.wrap({k: active[k] for k in keys}).items()
        if isinstance(p, CachedProvider)
    }
    return BatchSide(
        plan, run_dir, journal, apis, submit, set(done), state, say, wait, extractor, caches
    )

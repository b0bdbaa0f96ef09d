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
from orchestrator.spec.campaign import BATCH_PROVIDERS, Campaign


def batch_everything(campaign: Campaign, console: Console) -> None:
    """run --batch: every model whose provider has a batch API runs in batch mode."""
    models = campaign.config.models
    online = [m.label for m in models if m.provider not in BATCH_PROVIDERS]
    if len(online) == len(models):
        raise UserError("--batch: no model of this campaign has a batch API", field="--batch",
                        fix=f"batch mode is for providers {', '.join(BATCH_PROVIDERS)}; drop --batch")
    if online:
        console.print(f"--batch: {', '.join(map(escape, online))} ha{'s' if len(online) == 1 else 've'} "
                      "no batch API and run(s) online", highlight=False)
    campaign.config = campaign.config.model_copy(update={"models": [
        m.model_copy(update={"batch": True}) if m.provider in BATCH_PROVIDERS else m for m in models]})


def check_batchable(plan: Plan) -> None:
    """A task whose study makes its own calls (several per task, each depending on the last)
    cannot be one line of a batch."""
    from orchestrator.studies import registered
    kinds = {kind for study in registered() for kind in study.routine_kinds}
    for i, model in enumerate(plan.campaign.config.models):
        if not model.batch:
            continue
        cell = next((c for c in plan.cells if c.model_index == i and c.contract.kind in kinds), None)
        if cell is not None:
            raise UserError(f"job {cell.job.id} makes several calls per task ({cell.contract.kind}), "
                            "which a batch cannot hold", file=str(plan.campaign.source),
                            field=f"models[{i}].batch",
                            fix="set batch = false for this model, or run that job in another campaign")


def batch_side(plan: Plan, run_dir: Path, active: dict[str, Provider], done: set[str],
               state: RunState, console: Console, wait: bool, extractor: Extractor | None,
               cache: RunCache) -> BatchSide | None:
    """The batch side of this run: models in batch mode, and any model with batches still in
    flight (collected even when it is now online, so that nothing is paid for twice)."""
    journal = Journal(run_dir)
    in_flight = {b.model_key for b in journal.open_batches()}
    submit = {m.key for m in plan.campaign.config.models if m.batch and m.key in active}
    keys = submit | (in_flight & set(active))
    if not keys:
        return None
    from orchestrator.batch.wire import batch_api
    apis = {key: batch_api(active[key]) for key in keys}
    say = lambda text: console.print(escape(text), highlight=False)  # noqa: E731
    caches = {k: p for k, p in cache.wrap({k: active[k] for k in keys}).items()
              if isinstance(p, CachedProvider)}
    return BatchSide(plan, run_dir, journal, apis, submit, set(done), state, say, wait, extractor,
                     caches)

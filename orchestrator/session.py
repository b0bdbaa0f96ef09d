"""The composition root of a run: it wires the plan, the providers, the store, the batch side and
the cache together with the registered studies, which the layers below take as arguments.

One `run` invocation: check everything, open the run directory, execute, summarise. Also the
entry points that load a campaign with the registered studies' job readers."""

from __future__ import annotations

import shlex
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from orchestrator.batch.inputs import delete_leftovers
from orchestrator.batch.journal import Journal
from orchestrator.batch.setup import batch_everything, batch_side, check_batchable
from orchestrator.cache.session import run_cache
from orchestrator.engine.caller import Helper
from orchestrator.engine.extract import Extractor
from orchestrator.engine.files import private_folder
from orchestrator.engine.lock import RunLock
from orchestrator.engine.progress import RunProgress
from orchestrator.engine.run_folder import campaign_of_run as _campaign_of_run
from orchestrator.engine.run_folder import manifest_for, run_dir_for
from orchestrator.engine.runner import execute
from orchestrator.engine.state import RunState
from orchestrator.engine.store import RunStore, scan_results, spent_so_far
from orchestrator.errors import UserError
from orchestrator.nightly.runs import AUTO, auto_run_id, point_latest
from orchestrator.plan import Plan
from orchestrator.pricing import FREE_PROVIDERS, did_you_mean
from orchestrator.providers.base import Provider
from orchestrator.providers.registry import make_provider
from orchestrator.spec import build, jobs
from orchestrator.spec.campaign import Campaign
from orchestrator.spec.credentials import check_credentials
from orchestrator.studies import registered

# What shows a run's progress: RunProgress, or what takes its arguments and does its job
ProgressFactory = Callable[[Console, dict[str, tuple[str, int, int]], RunState], RunProgress]


def load_campaign(path: Path, overrides: dict[str, Any] | None = None) -> Campaign:
    """A campaign config file, its jobs read by the registered studies."""
    return build.load_campaign(path, overrides, studies=registered())


def campaign_from(
    raw: dict[str, Any],
    path: Path | None,
    overrides: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
) -> Campaign:
    """A campaign config's table (a file's, or a config built in Python dumped as one), its
    jobs read by the registered studies (spec/build.py)."""
    return build.campaign_from(raw, path, overrides, studies=registered(), flags=flags)


def load_job(path: Path) -> Any:
    """A job file read by whichever registered study knows its format (spec/jobs.py)."""
    return jobs.load_job(path, registered())


def build_campaign(config: Any, path: Path | None, jobs: list[Any] | None = None) -> Campaign:
    """A validated config made a campaign (spec/build.py), its jobs read by the registered studies."""
    return build.build_campaign(config, path, jobs, studies=registered())


def campaign_of_run(run_dir: Path) -> Campaign:
    """The campaign a run folder was started with (engine/run_folder.py)."""
    return _campaign_of_run(run_dir, registered())


def routines() -> dict[str, Any]:
    """The studies' own call routines by contract kind (the trace audit's multi-call tasks)."""
    return {kind: study.routine(kind) for study in registered() for kind in study.routine_kinds}


@dataclass
class RunOutcome:
    run_dir: Path
    already_complete: bool
    by_status: Counter
    state: RunState
    pending_before: int
    in_flight: int = 0  # tasks in batches not yet collected (run --no-wait; a later run collects)
    unsent: int = 0  # tasks of models in batch mode that were not sent (the messages say why)

    @property
    def exit_code(self) -> int:
        if self.state.budget_reached:
            return 3
        if self.state.interrupted_by is not None:
            return 128 + self.state.interrupted_by
        return 1 if self.by_status["failed"] or self.state.fatal or self.unsent else 0


def make_extractor(campaign: Campaign) -> Extractor | None:
    model = campaign.config.extractor
    if model is None:
        return None
    limit = campaign.config.limit_for(model.limit_key)
    return Extractor(
        model, make_provider(model, limit, campaign.config.run_id)
    )  # the engine gives it its key's controller


def make_screener(campaign: Campaign) -> Helper | None:
    model = campaign.config.screener
    if model is None:
        return None
    return Helper(
        model,
        make_provider(model, campaign.config.limit_for(model.limit_key), campaign.config.run_id),
    )


def resume_command(campaign: Campaign | None = None, collect: bool = False) -> str:
    """The command that goes on with this run: the one typed, or for a run named by date
    (--run-id auto) its folder, since the same command after midnight UTC starts a new night.
    `collect`: without --no-wait, so that it waits for the batches in flight."""
    if campaign is not None and campaign.named_by_date:
        return " ".join(shlex.quote(a) for a in ["orchestrator", "run", str(run_dir_for(campaign))])
    args = [a for a in sys.argv[1:] if not (collect and a == "--no-wait")]
    return " ".join(shlex.quote(a) for a in ["orchestrator", *args])


def check_budget(
    campaign: Campaign, plan: Plan, done_by_model: dict[str, int], spent: float, budget: float
) -> None:
    """Refuse a plan estimated above the budget, and a budget that could not be kept because a
    paid model has no price (its spend would count as nothing)."""
    from orchestrator.estimate import remaining, total_cost

    models = [("models", m) for m in campaign.config.models]
    models += campaign.config.helpers()
    for where, m in models:
        if m.price is None and m.provider not in FREE_PROVIDERS:
            close = campaign.close_prices.get(m.key)
            raise UserError(
                f"model {m.label} ({where}) has no price, so --budget cannot count its spend"
                + (f": {did_you_mean(close)}" if close else ""),
                file=campaign.source,
                field=f"{where}.price",
                fix=("correct its name if it is misspelled, or " if close else "")
                + "add it to configs/prices.toml or set price = {input = ..., output = ...}",
            )
    estimated = total_cost(remaining(plan, done_by_model))
    if spent + estimated > budget:
        raise UserError(
            f"the plan is estimated at ${estimated:,.4f} more (already spent ${spent:,.4f}), "
            f"over the budget of ${budget:,.4f}",
            field="--budget",
            fix="raise --budget, or lower samples, models or max_tokens (see orchestrator plan)",
        )


def name_run(campaign: Campaign) -> None:
    """Give a run started with --run-id auto its name (the UTC date), once."""
    if campaign.run_dir is None and campaign.config.run_id == AUTO:
        c = campaign.config  # today's open night, or a new folder: a finished one stays as it is
        run_id = auto_run_id(Path(c.output_dir) / c.name, lambda: Plan(campaign).fingerprint())
        campaign.config = c.model_copy(update={"run_id": run_id})
        campaign.named_by_date = campaign.nightly = True


def run_campaign(
    campaign: Campaign,
    console: Console,
    handle_signals: bool = True,
    budget: float | None = None,
    wait: bool = False,
    batch: bool = False,
    wait_for_batches: bool = True,
    stop: threading.Event | None = None,
    progress: ProgressFactory = RunProgress,
) -> RunOutcome:
    """`batch`: every model with a batch API runs in batch mode (run --batch);
    `wait_for_batches` off: submit batches and return (run --no-wait). `handle_signals` off and
    `stop` (set from another thread to stop the run as Ctrl-C does): the run goes on in a thread
    that is not the main one (orchestrator.api); `progress`: what shows it (RunProgress's
    arguments), a notebook's display there."""
    check_credentials(campaign)
    name_run(campaign)
    if batch:
        batch_everything(campaign, console, set(routines()))
    plan = Plan(campaign)
    check_batchable(plan, set(routines()))
    if not wait_for_batches and not any(m.batch for m in campaign.config.models):
        console.print(
            "--no-wait is for batch mode, and no model of this campaign runs in it: "
            "the run goes on as usual"
        )

    # Providers are built first: a missing API key must fail before anything is written.
    def say(text: str) -> None:  # what endpoint pools and replicas report
        console.print(text, markup=False, highlight=False)

    providers: dict[str, Provider] = {
        m.key: make_provider(m, campaign.config.limit_for(m.limit_key), campaign.config.run_id, say)
        for m in campaign.config.models
    }
    store = RunStore(run_dir_for(campaign))
    manifest, hint = manifest_for(campaign, plan), "orchestrator run CONFIG --run-id NEW_ID"
    store.check(manifest, hint)  # a changed plan is refused before anything is written
    if budget is not None and not store.path.exists():  # a new run: refused before it exists
        check_budget(campaign, plan, {}, 0.0, budget)
    try:
        private_folder(store.path)
    except OSError as exc:  # a read-only disk, a folder of another user, a file in the way
        raise UserError(
            f"cannot create the run folder {store.path}: {exc.strerror or exc}",
            file=campaign.source,
            field="output_dir",
            fix="set output_dir to a folder you can write to, or make this one writable",
        ) from None
    if campaign.named_by_date:
        point_latest(store.path.parent, store.path.name)
    # From here until the writer closes, this process owns the run: two runs of one folder
    # would both call every pending task and pay for it twice.
    with RunLock(store.path) as lock:
        lock.acquire(
            wait,
            on_wait=lambda who: console.print(
                f"this run is in use by {who}; waiting for it to finish (Ctrl-C stops waiting)"
            ),
        )
        return _run_locked(
            campaign,
            plan,
            providers,
            store,
            manifest,
            hint,
            console,
            handle_signals,
            budget,
            wait_for_batches,
            stop,
            progress,
        )


def _run_locked(
    campaign: Campaign,
    plan: Plan,
    providers: dict[str, Provider],
    store: RunStore,
    manifest: dict[str, Any],
    hint: str,
    console: Console,
    handle_signals: bool,
    budget: float | None,
    wait_for_batches: bool,
    stop: threading.Event | None,
    progress: ProgressFactory,
) -> RunOutcome:
    store.check(manifest, hint)  # again: another process may have started this run meanwhile
    scored = {m.key for m in campaign.config.models if m.answers == "score"}
    scan = scan_results(store.results, scored)
    spent = spent_so_far(store.results) if budget is not None else 0.0
    # A run that only collects batches already sent costs nothing more: no budget refuses it.
    # Otherwise the estimate covers them too, since their cost counts when they come back.
    sent = Journal(store.path).sent_tasks(scan.done)
    if budget is not None and plan.total - len(scan.done) - sent:
        check_budget(campaign, plan, scan.done_by_model, spent, budget)
    existed = store.open(manifest, hint)
    if scan.repaired_bytes:
        console.print(
            f"[yellow]repaired a torn last line ({scan.repaired_bytes} bytes); "
            "that task runs again[/]"
        )
    pending = plan.total - len(scan.done)
    state = RunState(budget=budget, spend=spent)
    if existed:
        console.print(f"resuming {store.path}: {len(scan.done):,} of {plan.total:,} tasks done")
    delete_leftovers(store.path, providers, lambda text: console.print(text, markup=False))
    if pending == 0:
        return RunOutcome(store.path, True, Counter(), state, 0)
    per_model = plan.per_model()
    for m in campaign.config.models:
        server = m.server if m.provider == "local" else None
        if server is not None and per_model[m.key] > scan.done_by_model.get(m.key, 0):
            servers = (
                f"{server.replicas} replica(s) on Ray"
                if server.backend == "ray"
                else f"{server.slots} llama.cpp server(s)"
            )
            console.print(
                f"starting {servers} for {m.name} ({m.version}); the first call "
                "waits for the model to load"
            )
    models = {
        key: (m.label, per_model[key], scan.done_by_model.get(key, 0))
        for m in campaign.config.models
        for key in [m.key]
    }
    by_status: Counter = Counter()
    with run_cache(campaign, console) as cache, progress(console, models, state) as shown:

        def on_record(rec: dict[str, Any]) -> None:
            by_status[rec["status"]] += 1
            shown.on_record(rec)

        # Only models with work left are started (a finished local model boots no server).
        active = {k: p for k, p in providers.items() if per_model[k] > scan.done_by_model.get(k, 0)}
        extractor = cache.helper(make_extractor(campaign))
        side = batch_side(
            plan, store.path, active, scan.done, state, console, wait_for_batches, extractor, cache
        )
        # A model switched back online runs online, but for its tasks in batches in flight,
        # which the batch side collects (requeued ones run online in the next run).
        if side is not None:
            anyio.run(side.settle_all)
        online = {k: p for k, p in active.items() if side is None or k not in side.submit}
        skip = scan.done | side.journal.in_flight_tasks() if side is not None else scan.done
        anyio.run(
            execute,
            plan,
            store,
            skip,
            cache.wrap(online),
            on_record,
            state,
            handle_signals,
            extractor,
            cache.helper(make_screener(campaign)),
            side,
            routines(),
            scan.paid,
            stop,
        )
    return RunOutcome(
        store.path,
        False,
        by_status,
        state,
        pending,
        side.in_flight if side is not None else 0,
        side.unsent if side is not None else 0,
    )

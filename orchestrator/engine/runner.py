"""The engine: per limit key a pool of workers sharing that key's slice of the plan; one writer
for all results.

A slow or throttled provider never holds up the others, since each limit key (provider +
credential) has its own workers and its own rate controller, which every attempt passes, the
extractor's on that key too.
tenacity retries rate-limited and transient errors with exponential backoff and jitter,
honouring Retry-After up to `max_pause_s`. Errors have a scope: a request the server rejects
(too long) is that task's final record; a fatal error (bad key, unknown model, quota used up, a
hint beyond `max_pause_s`, a host that cannot be reached through a whole task's retries) stops
that model's tasks only.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import anyio

from orchestrator.engine.caller import Caller, Helper, Routine
from orchestrator.engine.calls import call_with_retries, safe_parse
from orchestrator.engine.extract import Extractor
from orchestrator.engine.limits import KeyController
from orchestrator.engine.paid import Paid
from orchestrator.engine.records import Outcome, make_record, now
from orchestrator.engine.scoring import Premises, Scoring, score_task
from orchestrator.engine.state import RunState
from orchestrator.engine.stopping import watch_signals, watch_stop
from orchestrator.engine.store import ResultWriter, RunStore
from orchestrator.parse import Parsed
from orchestrator.plan import Plan, Task
from orchestrator.providers.base import Completion, Provider
from orchestrator.providers.errors import (
    Fatal,
    ProviderError,
    RateLimited,
    Refused,
    TooLong,
    Transient,
    Unreachable,
)

FLUSH_EVERY_S = 0.2  # the most a crash can lose; those tasks simply run again on resume


def parse_error_note(parsed: Parsed, completion: Completion) -> str | None:
    """Why no answer was found, with the finish reason when the answer was cut short or empty
    (max_tokens reached, Gemini's MAX_TOKENS with no text at all)."""
    if parsed.ok or completion.finish_reason in (None, "stop", "end_turn", "stop_sequence", "STOP"):
        return parsed.error
    return f"{parsed.error} (finish reason {completion.finish_reason})"


class BatchWork(Protocol):
    """The batch side of a run (batch/runner.BatchSide), run beside the workers and writing
    through the same writer."""

    apis: dict[str, Any]

    async def run(self, writer: ResultWriter) -> None: ...


@dataclass
class Shared:
    """What every worker of a run shares besides its key: the campaign's helper models, the
    premise scores of scoring models, and the studies' own call routines by contract kind."""

    extractor: Extractor | None = None
    screener: Helper | None = None
    premises: Premises = field(default_factory=Premises)
    routines: dict[str, Routine] = field(default_factory=dict)
    # scored options that failed attempts of pending tasks paid for (store.scan_results)
    paid: dict[str, Paid] = field(default_factory=dict)


async def _answer(
    provider: Provider,
    gate: KeyController,
    task: Task,
    shared: Shared,
    on_retry: Callable[[], None],
    started: datetime,
    scoring: Scoring | None,
    answered: list[Completion],
) -> Outcome:
    """A generated or scored answer, parsed (and stated by the extractor when its JSON is lost).
    `answered` gets the paid answer as soon as it is in, for a stop during the extraction."""
    if scoring is not None:
        completion, attempts = await score_task(
            provider, gate, task, shared.premises, on_retry, scoring
        )
        parsed = Parsed(True, choice=completion.text)
    else:
        completion, attempts = await call_with_retries(provider, gate, task, on_retry)
        answered.append(completion)
        parsed = safe_parse(completion.text, task)
    extracted_by, extra_cost, extractor = None, 0.0, shared.extractor
    if not parsed.ok and extractor is not None and completion.text.strip():
        try:
            recovered, extra_cost = await extractor.extract(task, completion.text, lambda: None)
        except ProviderError:
            recovered = None  # the original parse error stands
        if recovered is not None and recovered.ok:
            parsed, extracted_by = recovered, extractor.model.label
    return Outcome(
        "ok" if parsed.ok else "parse_error",
        attempts,
        0.0,
        started,
        started,
        completion,
        parsed,
        parse_error_note(parsed, completion),
        extracted_by=extracted_by,
        extra_cost=extra_cost,
    )


async def _routine(routine: Routine, caller: Caller, started: datetime) -> Outcome:
    """A task whose study makes its calls itself (caller.py)."""
    result = await routine(caller)
    return Outcome(
        result.status,
        caller.attempts,
        0.0,
        started,
        started,
        caller.completion(result.text),
        error=result.error,
        extra_cost=caller.extra_cost,
        response=result.response,
    )


async def run_one(
    provider: Provider,
    gate: KeyController,
    task: Task,
    state: RunState,
    shared: Shared,
    keep: Callable[[dict[str, Any]], None] = lambda rec: None,
) -> dict[str, Any]:
    """The task's record. Stopped part way (--budget, a signal), a task that has paid for some
    calls hands a `failed` record of them to `keep` before the stop goes on, so their spend
    counts and its resume reuses what it can."""
    started, t0 = now(), time.perf_counter()
    model_key = task.cell.model_key
    retries = 0

    def on_retry() -> None:
        nonlocal retries
        retries += 1
        state.retries[model_key] += 1

    routine = shared.routines.get(task.cell.contract.kind)
    caller = (
        Caller(provider, gate, task, on_retry, shared.screener) if routine is not None else None
    )
    scoring = Scoring(paid=shared.paid.pop(task.task_id, None)) if task.cell.scored else None
    answered: list[Completion] = []  # a generated answer paid for, while it is extracted

    def errored(status: str, error: str) -> Outcome:
        """An error's outcome; a routine's keeps what its earlier calls cost and logged, so the
        record counts them (a resumed task pays again, and the spend says so); a scored one
        keeps the options it paid for, which its resume reuses."""
        if scoring is not None and scoring.spent:
            partial = scoring.completion("")
            return Outcome(
                status, scoring.attempts + 1, 0.0, started, started, partial, error=error
            )
        if caller is None:
            return Outcome(status, retries + 1, 0.0, started, started, error=error)
        return Outcome(
            status,
            caller.attempts + 1,
            0.0,
            started,
            started,
            caller.completion("") if caller.calls else None,
            error=error,
            extra_cost=caller.extra_cost,
            response=caller.log or None,
        )

    try:
        if caller is not None:
            outcome = await _routine(routine, caller, started)
        else:
            outcome = await _answer(
                provider, gate, task, shared, on_retry, started, scoring, answered
            )
    except Refused as exc:
        outcome = errored("refused", str(exc))
    except TooLong as exc:  # final for this task (nothing to retry on resume); the model goes on
        outcome = errored("too_long", str(exc))
    except (RateLimited, Transient, Fatal) as exc:
        outcome = errored("failed", f"{type(exc).__name__}: {exc}")
        if isinstance(exc, Fatal | Unreachable):  # no other task of the model would fare better
            state.fatal.setdefault(model_key, str(exc))
    except anyio.get_cancelled_exc_class():
        stopped = "Stopped: the run stopped (budget or signal) part way"
        cut = None
        if (scoring is not None and scoring.spent) or (caller is not None and caller.calls):
            cut = errored("failed", stopped)
        elif answered:  # stopped while the extractor read it: the answer was paid for
            cut = Outcome("failed", retries + 1, 0.0, started, started, answered[0], error=stopped)
        if cut is not None:
            cut.latency_ms, cut.finished = (time.perf_counter() - t0) * 1000, now()
            keep(make_record(task, cut))
        raise
    outcome.latency_ms = (time.perf_counter() - t0) * 1000
    outcome.finished = now()
    return make_record(task, outcome)


async def _work(
    providers: dict[str, Provider],
    gate: KeyController,
    state: RunState,
    tasks: Iterator[Task],
    writer: ResultWriter,
    shared: Shared,
) -> None:
    """Workers of one key share its task iterator: next() never awaits, so no two collide."""
    for task in tasks:
        if task.cell.model_key in state.fatal:
            continue  # left for the next resume, after the user fixes the model
        provider = providers[task.cell.model_key]
        writer.append(await run_one(provider, gate, task, state, shared, writer.append))


async def _start_all(providers: list[Provider]) -> None:
    """Start the providers side by side (local servers load their models in parallel)."""
    try:
        async with anyio.create_task_group() as tg:
            for provider in providers:
                tg.start_soon(provider.start)
    except BaseExceptionGroup as group:  # one clear error (e.g. a model that cannot load)
        raise group.exceptions[0] from None


def _start_key(
    workers: anyio.abc.TaskGroup,
    plan: Plan,
    gate: KeyController,
    model_indices: list[int],
    skip: set[str],
    providers: dict[str, Provider],
    state: RunState,
    writer: ResultWriter,
    shared: Shared,
) -> None:
    """One limit key: `max_in_flight` workers sharing the key's slice of the plan."""
    tasks = plan.tasks(model_indices, skip)
    for _ in range(gate.config.max_in_flight):
        workers.start_soon(_work, providers, gate, state, tasks, writer, shared)


def _gates(plan: Plan, keys: Iterable[str], helpers: list[Helper]) -> dict[str, KeyController]:
    """One rate controller per limit key, whoever calls through it: a helper model (extractor,
    screener) on a key the models use shares theirs, or the key would get its limits twice over."""
    config = plan.campaign.config
    gates = {key: KeyController(config.limit_for(key)) for key in keys}
    for helper in helpers:
        key = helper.model.limit_key
        helper.gate = gates.setdefault(key, KeyController(config.limit_for(key)))
    return gates


async def execute(
    plan: Plan,
    store: RunStore,
    skip: set[str],
    providers: dict[str, Provider],
    on_record: Callable[[dict[str, Any]], None],
    state: RunState | None = None,
    handle_signals: bool = False,
    extractor: Extractor | None = None,
    screener: Helper | None = None,
    batch: BatchWork | None = None,
    routines: dict[str, Routine] | None = None,
    paid: dict[str, Paid] | None = None,
    stop: threading.Event | None = None,
) -> RunState:
    """Run every task of the plan not in `skip` (those of `batch`'s models through their batch
    APIs, batch/runner.py); returns when all are written or on a signal. `routines`: the
    studies' own call routines by contract kind (session.py passes the registered ones);
    `paid`: what failed attempts of scored tasks paid for (store.scan_results); `stop`: set from
    another thread, it stops the run as a signal does (the engine then runs in a worker thread,
    where no signal handler can be installed: orchestrator.api)."""
    state = state or RunState()
    config = plan.campaign.config
    groups: dict[str, list[int]] = defaultdict(list)
    for i, model in enumerate(config.models):
        if model.key in providers:  # the rest run in batch mode, or have nothing left to do
            groups[model.limit_key].append(i)

    work = anyio.CancelScope()  # cancelled by a signal: keep what is written

    online = anyio.CancelScope()  # cancelled by the budget: batches sent are paid, and collected

    def count(rec: dict[str, Any]) -> None:
        state.spend += rec.get("costUsd") or 0.0
        if state.budget is not None and state.spend >= state.budget and not state.budget_reached:
            state.budget_reached = True  # nor does the batch side send any more
            online.cancel()
        on_record(rec)

    helpers = [h for h in (extractor, screener) if h is not None]
    gates = _gates(plan, groups, helpers)
    shared = Shared(
        extractor,
        screener,
        routines=routines or {},
        paid={task_id: found for task_id, found in (paid or {}).items() if task_id not in skip},
    )
    writer = store.writer(count)
    everyone = [*providers.values(), *(h.provider for h in helpers)]
    try:
        async with anyio.create_task_group() as control:
            if handle_signals:  # from the start: Ctrl-C while a model loads stops cleanly too
                await control.start(watch_signals, work, state)
            if stop is not None:
                await control.start(watch_stop, work, state, stop)
            try:
                with work:
                    await _start_all(everyone)
                    async with anyio.create_task_group() as running:
                        running.start_soon(writer.flush_every, FLUSH_EVERY_S)
                        async with anyio.create_task_group() as workers:
                            if batch is not None:
                                workers.start_soon(batch.run, writer)
                            with online:
                                async with anyio.create_task_group() as keys:
                                    for key, model_indices in groups.items():
                                        _start_key(
                                            keys,
                                            plan,
                                            gates[key],
                                            model_indices,
                                            skip,
                                            providers,
                                            state,
                                            writer,
                                            shared,
                                        )
                        running.cancel_scope.cancel()
            finally:
                # The signal watcher still listens here, so a second signal is absorbed.
                writer.close()
                with anyio.CancelScope(shield=True):
                    for provider in everyone:
                        await provider.aclose()
                    for api in batch.apis.values() if batch is not None else ():
                        await api.aclose()
                control.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the signal watcher's group wraps the one real error
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    return state

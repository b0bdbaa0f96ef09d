"""The batch side of a run: a batch model's pending tasks go out as batch jobs, and ended
batches come back as ordinary records (`batchId` added), through the run's one writer.

Per model, one pass is: settle what a crash left unconfirmed (settle.py), submit every pending
task in batches within the provider's limits, poll until each has ended, collect it. Items
that failed or expired, and tasks a batch returned nothing for, are pending again and go out in
the next pass (up to PASSES per run; after the last one they are recorded as failed, which a
later run retries). With `wait` off (run --no-wait) a pass stops after submitting, collecting
what has already ended: a later run polls and collects the rest.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

from orchestrator.batch.api import BatchAPI, BatchLimits, Item
from orchestrator.batch.inputs import delete_input
from orchestrator.batch.journal import INPUTS, Batch, Journal, batches_summary
from orchestrator.batch.settle import settle
from orchestrator.batch.submit import Submitting
from orchestrator.cache.provider import CachedProvider
from orchestrator.engine.calls import safe_parse
from orchestrator.engine.extract import Extractor
from orchestrator.engine.records import Outcome, make_record, now
from orchestrator.engine.runner import parse_error_note
from orchestrator.engine.state import RunState
from orchestrator.engine.store import ResultWriter
from orchestrator.plan import Plan, Task
from orchestrator.providers.errors import (
    Fatal,
    ProviderError,
    RateLimited,
    Refused,
    TooLong,
    Transient,
)

PASSES = 3  # submissions of a task per run before it is recorded as failed
QUEUE_WAITS = 20  # waits for room in a full batch queue per run (no pass is counted for them)
QUEUE_PAUSE_MAX_S = 600.0
# Some room under the provider's byte limit for what wraps the lines (Anthropic's and Gemini's
# request body around them).
# OpenAI's word for a batch refused because the model's queue (its enqueued tokens) is full: a
# rate limit, not a fault of the batch; its tasks wait for the batches in flight, then go again.
QUEUE_FULL = "token_limit_exceeded"
# Polls in a row that may fail (network, provider) before the model stops for this run: a
# batch takes hours, and a few minutes without network must not end the wait.
POLL_FAILURES = 20


@dataclass
class BatchSide(Submitting):
    """The batch models of a run and what they need."""

    plan: Plan
    run_dir: Path
    journal: Journal
    apis: dict[str, BatchAPI]  # model key -> its provider's batch API
    submit: set[str]  # the keys in batch mode (the others only collect what is in flight)
    done: set[str]  # tasks with a final record; grows as batches are collected
    state: RunState
    say: Callable[[str], None]
    wait: bool = True
    extractor: Extractor | None = None
    # model key -> its response cache (cache = true): answers it holds are not sent again, and
    # what comes back in a batch is kept
    caches: dict[str, CachedProvider] = field(default_factory=dict)
    in_flight: int = 0  # tasks left in batches not yet collected when the side returned
    unsent: int = 0  # tasks of models in batch mode left pending and in no batch

    def __post_init__(self) -> None:
        self._index = {m.key: i for i, m in enumerate(self.plan.campaign.config.models)}
        self._labels = {m.key: m.label for m in self.plan.campaign.config.models}
        self._poll_failures: Counter = Counter()  # rounds in a row that failed, per model
        self._requeued: Counter = Counter()  # tasks given back to pending in this pass, per model
        self._queue_refused: Counter = Counter()  # of them, those a full batch queue refused
        # per model, smaller limits than the API's, once a server in the way refused a batch
        # (submit.py): journalled, so that a later run does not learn them again
        self._limits = {k: BatchLimits(*v) for k, v in self.journal.limits.items()}

    async def run(self, writer: ResultWriter) -> None:
        """Every batch model side by side."""
        self._drop_orphans(self.run_dir / INPUTS)
        try:
            async with anyio.create_task_group() as tg:
                for key, api in self.apis.items():
                    tg.start_soon(self._model, key, api, writer, self.done)
        finally:
            in_flight = self.journal.in_flight_tasks()
            self.in_flight = len(in_flight)
            # Tasks of models in batch mode neither written nor in flight: not sent this time
            # (a fatal error, the budget, passes spent on batches that never arrived).
            indices = [self._index[key] for key in self.submit]
            self.unsent = (
                sum(1 for _ in self.plan.tasks(indices, self.done | in_flight)) if indices else 0
            )

    async def settle_all(self) -> None:
        """Before the run decides what goes online: batches a crash left unconfirmed are found
        or abandoned (settle.py), so that an abandoned batch's tasks run this time."""
        try:
            for key, api in self.apis.items():
                try:
                    await settle(self.journal, key, api, self.say)
                except ProviderError as exc:  # its unconfirmed tasks stay in flight, not online
                    self.state.fatal.setdefault(key, f"batch API: {exc}")
        finally:  # their sessions belong to this event loop; the run opens new ones
            for api in self.apis.values():
                await api.aclose()

    # --- one model ---------------------------------------------------------------------------
    async def _model(self, key: str, api: BatchAPI, writer: ResultWriter, done: set[str]) -> None:
        config = self.plan.campaign.config
        poll_s = config.limit_for(config.models[self._index[key]].limit_key).batch_poll_s
        submits = key in self.submit  # else it only collects what is in flight (now online)
        number = waits = 0
        try:
            while number < PASSES:
                final = number == PASSES - 1 or not submits
                self._requeued[key] = self._queue_refused[key] = 0
                if submits:
                    await self._submit_pending(key, api, writer, done)
                await self._round(key, api, writer, done, final)
                if not self.wait:
                    return
                # A fatal error or the budget stops sending; what was sent is still collected.
                while self.journal.open_batches(key):
                    await anyio.sleep(poll_s)
                    await self._round(key, api, writer, done, final)
                if self._queue_refused[key] and self._may_send(key) and waits < QUEUE_WAITS:
                    # the queue was full: a rate limit, which costs no pass; wait, then again
                    pause = min(QUEUE_PAUSE_MAX_S, max(poll_s, 0.05) * 2**waits)
                    waits += 1
                    self.say(
                        f"{self._labels[key]}: {self._queue_refused[key]:,} task(s) wait for "
                        f"room in the provider's batch queue; sending them again in {pause:g} s"
                    )
                    await anyio.sleep(pause)
                    continue
                if not self._requeued[key] or final or not self._may_send(key):
                    return
                number += 1
                self.say(
                    f"{self._labels[key]}: {self._requeued[key]:,} task(s) failed or expired "
                    "in batch; sending them again"
                )
        except ProviderError as exc:  # the API itself failed (retries spent): stop this model
            self.state.fatal.setdefault(key, f"batch API: {exc}")

    def _may_send(self, key: str) -> bool:
        return key not in self.state.fatal and not self.state.budget_reached

    async def _round(
        self, key: str, api: BatchAPI, writer: ResultWriter, done: set[str], final: bool
    ) -> None:
        """One look at the model's batches: settle the unconfirmed, poll the others, collect
        those that ended. Each step is safe to repeat, so a failing network or provider is
        waited out for POLL_FAILURES rounds in a row before the model stops."""
        try:
            self._requeued[key] += await settle(self.journal, key, api, self.say)
            await self._poll_round(key, api, writer, done, final)
        except (Transient, RateLimited) as exc:
            self._poll_failures[key] += 1
            if self._poll_failures[key] >= POLL_FAILURES:
                raise
            self.say(
                f"{self._labels[key]}: the batch API failed ({exc}); trying again at the next poll"
            )
            return
        self._poll_failures[key] = 0

    async def _poll_round(
        self, key: str, api: BatchAPI, writer: ResultWriter, done: set[str], final: bool
    ) -> None:
        """Poll each open batch of the model once; collect those that ended; tell the progress
        display what the rest are doing."""
        try:
            await self._poll_each(key, api, writer, done, final)
        finally:
            self.state.batches_now(key, batches_summary(self.journal.open_batches(key)))

    async def _poll_each(
        self, key: str, api: BatchAPI, writer: ResultWriter, done: set[str], final: bool
    ) -> None:
        for batch in self.journal.open_batches(key):
            if batch.batch_id is None:
                continue  # its creation is unconfirmed yet (settle.py)
            progress = await api.poll(batch.batch_id)
            if (progress.state, progress.counts) != (batch.state, batch.counts):
                counts = ", ".join(f"{n:,} {k}" for k, n in progress.counts.items() if n)
                self.say(
                    f"{self._labels[key]}: batch {batch.batch_id} {progress.state}"
                    + (f" ({counts})" if counts else "")
                )
            self.journal.state(batch, progress.state, progress.counts)
            queue_full = bool(progress.error and QUEUE_FULL in progress.error)
            if queue_full:  # a rate limit of the queue, not a fault of the batch
                self.say(
                    f"{self._labels[key]}: batch {batch.batch_id} was not queued, the "
                    f"provider's queue for the model is full ({progress.error}); its tasks "
                    "wait and are sent again"
                )
            elif progress.error:  # the whole batch was refused (e.g. validation): no item will
                self.state.fatal.setdefault(key, f"batch {batch.batch_id} failed: {progress.error}")
            if progress.ended:
                # a batch the queue refused has no answer: its tasks wait, none is `failed`
                given_back = await self._collect(batch, api, writer, done, final and not queue_full)
                if queue_full:
                    self._queue_refused[key] += given_back
                else:
                    self._requeued[key] += given_back
                await self._forget_input(key, api, batch)

    async def _forget_input(self, key: str, api: BatchAPI, batch: Batch) -> None:
        await delete_input(self.journal, api, batch, self.say)

    # --- collecting --------------------------------------------------------------------------
    async def _collect(
        self, batch: Batch, api: BatchAPI, writer: ResultWriter, done: set[str], final: bool
    ) -> int:
        """Write the batch's items as records (those not already written by an earlier
        collection cut short); the journal says collected only once they are on disk."""
        wanted = set(batch.tasks) - done
        tasks = (
            {
                t.task_id: t
                for t in self.plan.tasks([self._index[batch.model_key]])
                if t.task_id in wanted
            }
            if wanted
            else {}
        )
        started, written, requeue = batch.submitted_at, 0, []
        async for item in api.items(batch.batch_id):
            task = tasks.pop(item.custom_id, None)
            if task is None:
                continue  # already written, or not one of ours
            record = await self._record(task, item, batch, started)
            if record is None:
                requeue.append((task, item.error))
                continue
            writer.append(record)
            done.add(task.task_id)
            written += 1
        requeue += [(task, None) for task in tasks.values()]  # no item came back for these
        if final:  # out of passes for this run: say why, and a later run tries again
            for task, error in requeue:
                writer.append(
                    make_record(
                        task,
                        Outcome(
                            "failed",
                            1,
                            _latency_ms(started),
                            started,
                            now(),
                            batch_id=batch.batch_id,
                            error=f"batch: {error or 'no result returned for this request'}",
                        ),
                    )
                )
        writer.sync()
        self.journal.collected(batch, batch.state, written, len(requeue))
        return len(requeue)

    async def _record(
        self, task: Task, item: Item, batch: Batch | None, started: datetime
    ) -> dict[str, Any] | None:
        """The item's record (of a batch, or the cache's answer without one), or None when the
        task goes back to pending."""
        finished, latency = now(), _latency_ms(started)
        batch_id = batch.batch_id if batch is not None else None
        if item.completion is None:
            error = item.error
            if isinstance(error, Refused):
                status = "refused"
            elif isinstance(error, TooLong):
                status = "too_long"
            elif isinstance(error, Fatal):
                self.state.fatal.setdefault(task.cell.model_key, str(error))
                status = "failed"
            else:
                return None
            return make_record(
                task,
                Outcome(status, 1, latency, started, finished, error=str(error), batch_id=batch_id),
            )
        completion = item.completion
        if batch is not None and (cache := self.caches.get(task.cell.model_key)) is not None:
            cache.keep(task, completion)
        parsed = safe_parse(completion.text, task)
        extracted_by, extra_cost = None, 0.0
        if not parsed.ok and self.extractor is not None and completion.text.strip():
            try:
                recovered, extra_cost = await self.extractor.extract(
                    task, completion.text, lambda: None
                )
            except ProviderError:
                recovered = None
            if recovered is not None and recovered.ok:
                parsed, extracted_by = recovered, self.extractor.model.label
        return make_record(
            task,
            Outcome(
                "ok" if parsed.ok else "parse_error",
                1,
                latency,
                started,
                finished,
                completion,
                parsed,
                parse_error_note(parsed, completion),
                extracted_by=extracted_by,
                extra_cost=extra_cost,
                batch_id=batch_id,
            ),
        )


def _latency_ms(started: datetime) -> float:
    """From submission to collection: what a batch answer took."""
    return max(0.0, (time.time() - started.timestamp()) * 1000)

"""Sending a batch model's pending tasks: batch input files within the provider's limits (or
the smaller ones a server in the way takes, learned from its 413), each journalled before it is
sent, so that a crash at any moment sends nothing twice. A part of BatchSide (runner.py)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.batch.api import BatchAPI, BatchLimits, Item, Unconfirmed
from orchestrator.batch.journal import INPUTS, Batch
from orchestrator.engine.files import folder_within, remove_file
from orchestrator.engine.records import Outcome, make_record, now
from orchestrator.engine.store import ResultWriter
from orchestrator.plan import Task
from orchestrator.providers.errors import TooLong

if TYPE_CHECKING:
    from orchestrator.batch.journal import Journal
    from orchestrator.plan import Plan

_BYTES_MARGIN = 64 * 1024  # under a provider's byte limit: the request around the input


class Submitting:
    """BatchSide's sending half; the attributes are BatchSide's."""

    plan: Plan
    journal: Journal
    run_dir: Path
    caches: dict[str, Any]
    _index: dict[str, int]
    _labels: dict[str, str]
    _limits: dict[str, BatchLimits]
    say: Callable[[str], None]

    def _may_send(self, key: str) -> bool:
        raise NotImplementedError

    async def _record(self, task: Task, item: Item, batch: Any, started: Any) -> dict | None:
        raise NotImplementedError

    async def _forget_input(self, key: str, api: BatchAPI, batch: Any) -> None:
        raise NotImplementedError

    async def _submit_pending(
        self, key: str, api: BatchAPI, writer: ResultWriter, done: set[str]
    ) -> None:
        def unsent() -> Iterator[Task]:
            return self.plan.tasks([self._index[key]], done | self.journal.in_flight_tasks())

        source = [unsent()]
        limits = self._limits.get(key, api.limits)
        folder = folder_within(self.run_dir, self.run_dir / INPUTS)  # never through a link
        next_task = lambda: self._next_uncached(key, source[0], writer, done)  # noqa: E731
        pending = await next_task()
        while pending is not None and self._may_send(key):
            name = f"bo-{key}-{secrets.token_hex(4)}"
            path = folder / f"{name}.jsonl"
            ids: list[str] = []
            size = 0
            # made exclusively, 0600: a batch input holds every prompt it sends
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                while pending is not None:
                    line = api.line(pending)
                    if ids and (
                        len(ids) >= limits.max_requests
                        or size + len(line) + 1 > limits.max_bytes - _BYTES_MARGIN
                    ):
                        break
                    f.write(line + b"\n")
                    size += len(line) + 1
                    ids.append(pending.task_id)
                    pending = await next_task()
                f.flush()
                os.fsync(f.fileno())
            batch = self.journal.intent(name, key, ids, path)

            def uploaded(file_id: str, batch: Batch = batch) -> None:
                self.journal.uploaded(batch, file_id)

            try:
                submitted = await api.submit(
                    name, path, len(ids), uploaded, self.journal.known_ids()
                )
            except Unconfirmed as exc:  # in flight until its results tell (settle.py)
                self.say(
                    f"{self._labels[key]}: {exc}; waiting for their results to tell which is {name}"
                )
                continue
            except TooLong as exc:  # a server in the way takes less than the API's limits
                if len(ids) > 1:  # journalled first: a crash after it loses no limit learned
                    smaller = BatchLimits(
                        max(1, len(ids) // 2), max(1024, size // 2 + _BYTES_MARGIN)
                    )
                    self.journal.too_large(batch, smaller.max_requests, smaller.max_bytes)
                self.journal.abandoned(batch)  # never sent: its tasks are pending again
                if len(ids) == 1:  # one request over the cap: that task's final outcome
                    (task,) = [
                        t for t in self.plan.tasks([self._index[key]]) if t.task_id == ids[0]
                    ]
                    at = now()
                    writer.append(
                        make_record(
                            task,
                            Outcome("too_long", 1, 0.0, at, at, error=f"batch: {exc}"),
                        )
                    )
                    done.add(task.task_id)
                    source[0] = unsent()
                    pending = await next_task()
                    continue
                await self._forget_input(key, api, batch)
                limits = self._limits[key] = smaller
                self.say(
                    f"{self._labels[key]}: a batch of {len(ids):,} task(s) ({size / 1e6:,.2f} MB) "
                    f"was refused as too large ({str(exc).splitlines()[0][:80]}); sending "
                    f"batches of at most {limits.max_requests:,} tasks and "
                    f"{(limits.max_bytes - _BYTES_MARGIN) / 1e6:,.2f} MB from now on"
                )
                source[0] = unsent()  # its tasks again, in smaller batches
                pending = await next_task()
                continue
            self.journal.created(batch, submitted.batch_id)
            self.say(
                f"{self._labels[key]}: submitted batch {submitted.batch_id} of {len(ids):,} "
                f"task(s) ({size / 1e6:,.1f} MB)"
            )

    async def _next_uncached(
        self, key: str, tasks: Iterator[Task], writer: ResultWriter, done: set[str]
    ) -> Task | None:
        """The next task to send; those the response cache answers are written as records now
        (parsed and extracted as a batch's answers are)."""
        cache = self.caches.get(key)
        for task in tasks:
            completion = cache.lookup(task) if cache is not None else None
            if completion is None:
                return task
            record = await self._record(task, Item(task.task_id, completion), None, now())
            if record is None:  # the cache's answer would not do: the task is sent after all
                return task
            writer.append(record)
            done.add(task.task_id)
        return None

    def _drop_orphans(self, folder: Path) -> None:
        """Input files of no open batch: written just before a crash cut short their intent, or
        left by one after `collected`. They were never sent, or never will be again. Run once,
        before any model writes a new one."""
        if not folder.is_dir() and not folder.is_symlink():
            return
        folder_within(self.run_dir, folder)  # a linked folder is refused, never emptied
        keep = {Path(b.input).name for b in self.journal.open_batches()}
        for path in folder.glob("*.jsonl"):
            if path.name not in keep:
                remove_file(path, within=self.run_dir)

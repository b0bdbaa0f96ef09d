"""batches.ndjson: what the run has sent to batch APIs, so a crash at any moment costs nothing.

One line per event, appended and synced to disk before the step it announces goes on:

    intent     the batch's name, model, task ids and input file: written before anything is sent
    uploaded   OpenAI: the input file's id
    created    the provider's batch id
    state      what a poll saw, when it changed
    collected  its items are in results.ndjson (written and synced first)
    abandoned  it never reached the provider (a crash before it was created): its tasks are
               pending again
    too_large  a server in the way refused it as too large (413): the model's batches from then
               on hold at most `requests` and `bytes`, in this run and every later one
    deleted    OpenAI: its uploaded input file is deleted there (after collected or abandoned;
               a run deletes those a crash or a failure left, before anything else)

A batch with an intent but no `created` line may or may not exist at the provider (the crash
came while the request was on its way): the runner asks the provider (BatchAPI.find) before it
decides. A torn last line (kill -9 mid-write) is skipped: an intent cut short was never sent.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from orchestrator.engine.files import open_append, remove_file
from orchestrator.engine.names import batch_input, provider_id
from orchestrator.errors import UserError

JOURNAL = "batches.ndjson"
INPUTS = "batches"  # the folder of the input files, one <name>.jsonl per batch


@dataclass
class Batch:
    """One batch as the journal knows it."""

    name: str
    model_key: str
    tasks: list[str]
    submitted_at: datetime
    input: str  # the input file, relative to the run folder
    batch_id: str | None = None
    file_id: str | None = None
    state: str = "submitting"
    counts: dict[str, int] = field(default_factory=dict)
    closed: bool = False  # collected or abandoned: nothing more will come of it
    written: int = 0  # records its collection wrote
    requeued: int = 0  # tasks it gave back to pending (failed, expired, missing)
    input_deleted: bool = False  # its uploaded input file, deleted at the provider

    @property
    def in_flight(self) -> bool:
        return not self.closed


def _now() -> str:
    return datetime.now(UTC).isoformat()


class Journal:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / JOURNAL
        self.batches: dict[str, Batch] = {}
        self.limits: dict[str, tuple[int, int]] = {}  # per model: (requests, bytes) learned
        if self.path.exists():
            for event in self._events():
                self._apply(event)

    def _events(self) -> Iterator[dict[str, Any]]:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                if number == len(lines):  # torn by a crash mid-write: that step never went on
                    return
                raise UserError(
                    f"line {number} of the batch journal is not JSON",
                    file=str(self.path),
                    fix="restore the file from a copy; never edit it by hand (it records "
                    "which batches were paid for)",
                ) from None
            if not isinstance(event, dict) or "event" not in event or "batch" not in event:
                raise UserError(
                    f"line {number} of the batch journal is not a journal event",
                    file=str(self.path),
                    fix="restore the file from a copy",
                )
            yield event

    def _apply(self, event: dict[str, Any]) -> None:
        kind, name = event["event"], event["batch"]
        if kind == "intent":
            batch_input(event["input"], str(self.path))  # a name, never a path
            self.batches[name] = Batch(
                name,
                event["model"],
                event["tasks"],
                datetime.fromisoformat(event["at"]),
                event["input"],
            )
            return
        batch = self.batches.get(name)
        if batch is None:
            return  # an event of an intent that was torn: nothing was sent for it
        if kind == "uploaded":
            batch.file_id = provider_id(event["file"], str(self.path), "file")
        elif kind == "created":
            batch.batch_id = provider_id(event["id"], str(self.path), "id")
            batch.state = "created"
        elif kind == "state":
            batch.state, batch.counts = event["state"], event.get("counts") or {}
        elif kind == "collected":
            batch.closed, batch.state = True, event.get("state", "collected")
            batch.written, batch.requeued = event.get("written", 0), event.get("requeued", 0)
        elif kind == "abandoned":
            batch.closed, batch.state = True, "abandoned"
        elif kind == "deleted":
            batch.input_deleted = True
        elif kind == "too_large":
            self.limits[batch.model_key] = (event["requests"], event["bytes"])

    def _append(self, event: dict[str, Any]) -> None:
        event = {**event, "at": event.get("at") or _now()}
        self._cut_torn_tail()
        with open_append(self.path) as f:
            f.write(orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE))
            f.flush()
            os.fsync(f.fileno())
        self._apply(event)

    def _cut_torn_tail(self) -> None:
        """A line torn by a crash is cut before the next is appended, or the two would make
        one line that no reader could take (the readers skip a torn tail, and write nothing)."""
        try:
            size = self.path.lstat().st_size
        except FileNotFoundError:
            return
        if size == 0 or self.path.is_symlink():  # a link: open_append refuses it, naming it
            return
        with os.fdopen(os.open(self.path, os.O_RDWR | os.O_NOFOLLOW), "r+b") as f:  # no link
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            end = size  # the last newline, read backwards a block at a time
            while end > 0:
                start = max(0, end - (1 << 20))
                f.seek(start)
                at = f.read(end - start).rfind(b"\n")
                if at >= 0:
                    end = start + at + 1
                    break
                end = start
            f.seek(end)
            try:  # whole, only its newline missing: it was read, and is kept
                orjson.loads(f.read())
                f.write(b"\n")
            except orjson.JSONDecodeError:
                f.truncate(end)
            os.fsync(f.fileno())

    # --- the steps -------------------------------------------------------------------------
    def intent(self, name: str, model_key: str, tasks: list[str], input_file: Path) -> Batch:
        self._append(
            {
                "event": "intent",
                "batch": name,
                "model": model_key,
                "count": len(tasks),
                "input": str(input_file.relative_to(self.run_dir)),
                "tasks": tasks,
            }
        )
        return self.batches[name]

    def uploaded(self, batch: Batch, file_id: str) -> None:
        self._append({"event": "uploaded", "batch": batch.name, "file": file_id})

    def created(self, batch: Batch, batch_id: str) -> None:
        self._append({"event": "created", "batch": batch.name, "id": batch_id})

    def state(self, batch: Batch, state: str, counts: dict[str, int]) -> None:
        if (state, counts) != (batch.state, batch.counts):
            self._append({"event": "state", "batch": batch.name, "state": state, "counts": counts})

    def collected(self, batch: Batch, state: str, written: int, requeued: int) -> None:
        self._append(
            {
                "event": "collected",
                "batch": batch.name,
                "state": state,
                "written": written,
                "requeued": requeued,
            }
        )
        self._drop_input(batch)

    def abandoned(self, batch: Batch) -> None:
        self._append({"event": "abandoned", "batch": batch.name})
        self._drop_input(batch)

    def too_large(self, batch: Batch, requests: int, nbytes: int) -> None:
        self._append(
            {"event": "too_large", "batch": batch.name, "requests": requests, "bytes": nbytes}
        )

    def input_deleted(self, batch: Batch) -> None:
        self._append({"event": "deleted", "batch": batch.name, "file": batch.file_id})

    def _drop_input(self, batch: Batch) -> None:
        """A closed batch's input file is never sent again (its tasks' next batch gets its own):
        it would only hold disk, ~1 KB a request."""
        name = batch_input(batch.input, str(self.path))
        remove_file(self.run_dir / INPUTS / name, within=self.run_dir)

    # --- what it holds ---------------------------------------------------------------------
    def open_batches(self, model_key: str | None = None) -> list[Batch]:
        return [
            b
            for b in self.batches.values()
            if b.in_flight and (model_key is None or b.model_key == model_key)
        ]

    def leftover_inputs(self, model_key: str | None = None) -> list[Batch]:
        """Closed batches whose uploaded input file is still at the provider: a crash or a
        failed delete came between their end and its deletion."""
        return [
            b
            for b in self.batches.values()
            if b.closed
            and b.file_id
            and not b.input_deleted
            and (model_key is None or b.model_key == model_key)
        ]

    def known_ids(self) -> frozenset[str]:
        """The provider ids of the run's batches."""
        return frozenset(b.batch_id for b in self.batches.values() if b.batch_id)

    def sent_tasks(self, done: set[str]) -> int:
        """Tasks without a record in batches the provider has (created, not yet collected)."""
        return sum(1 for b in self.open_batches() if b.batch_id for t in b.tasks if t not in done)

    def in_flight_tasks(self) -> set[str]:
        return {t for b in self.batches.values() if b.in_flight for t in b.tasks}


def describe_in_flight(run_dir: Path, labels: dict[str, str]) -> list[str]:
    """One line per batch in flight, for `status`: provider id, state, counts, when sent."""
    journal = Journal(run_dir) if (run_dir / JOURNAL).exists() else None
    if journal is None:
        return []
    lines = []
    for b in journal.open_batches():
        counts = ", ".join(f"{n:,} {k}" for k, n in b.counts.items() if n)
        lines.append(
            f"batch {b.batch_id or b.name + ' (creation not confirmed; the next run asks the provider)'}"
            f" of {labels.get(b.model_key, b.model_key)}: {len(b.tasks):,} tasks, {b.state}"
            + (f" ({counts})" if counts else "")
            + f", submitted {b.submitted_at:%Y-%m-%d %H:%M} UTC"
        )
    return lines


def batches_summary(batches) -> str | None:
    """ "2 batches: 1 in_progress, 1 validating; 120 completed, 3 failed": their states, and
    the provider's own request counts summed (None when there are none)."""
    batches = list(batches)
    if not batches:
        return None
    states = Counter(b.state for b in batches)
    counts: Counter = Counter()
    for b in batches:
        counts.update({k: v for k, v in b.counts.items() if isinstance(v, int) and k != "total"})
    tasks = sum(len(b.tasks) for b in batches)
    said = ", ".join(f"{n} {s}" for s, n in states.most_common())
    shown = ", ".join(f"{n:,} {k}" for k, n in counts.items() if n)
    return f"{len(batches)} batch{'es' * (len(batches) != 1)} of {tasks:,} tasks: {said}" + (
        f"; {shown}" if shown else ""
    )

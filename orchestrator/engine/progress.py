"""Progress per model: done/total, rate, ETA, retries and failures (rich on a terminal; off one,
as in cron mails and CI logs, a plain line per model every `log_every_s`)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from orchestrator.engine.state import RunState


class RateColumn(ProgressColumn):
    def render(self, task: Any) -> Text:
        if task.fields.get("in_batch"):  # the answers wait at the provider: no rate to show
            return Text("")
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f}/s" if speed else "-/s", style="cyan")


class LeftColumn(TimeRemainingColumn):
    """The time left, but for a model whose answers wait in batches."""

    def render(self, task: Any) -> Text:
        return Text("") if task.fields.get("in_batch") else super().render(task)


PUSH_EVERY_S = 0.1


class RunProgress:
    def __init__(
        self,
        console: Console,
        models: dict[str, tuple[str, int, int]],
        state: RunState,
        log_every_s: float = 15.0,
    ) -> None:
        """models: model key -> (label, total tasks, tasks already done)."""
        self.console, self.state, self.log_every_s = console, state, log_every_s
        self.live = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            LeftColumn(),
            TextColumn("retries {task.fields[retries]}  failed {task.fields[failed]}"),
            console=console,
            disable=not self.live,
        )
        self.ids = {
            key: self.progress.add_task(
                label, total=total, completed=done, retries=0, failed=0, in_batch=False
            )
            for key, (label, total, done) in models.items()
        }
        self.failed = dict.fromkeys(models, 0)
        self.models = models
        self.done = {key: done for key, (_, _, done) in models.items()}
        self._started = self._last_log = self._pushed = time.monotonic()
        state.on_batches = self.on_batches

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._push()
        self.progress.stop()

    def _push(self) -> None:
        """The counts to the display, at most every PUSH_EVERY_S (rich redraws it a few
        times a second anyway; an update per record cost a tenth of the engine's time a call)."""
        self._pushed = time.monotonic()
        for key, task in self.ids.items():
            self.progress.update(
                task,
                completed=self.done[key],
                retries=self.state.retries[key],
                failed=self.failed[key],
            )

    def on_record(self, rec: dict[str, Any]) -> None:
        key = rec["modelKey"]
        if rec["status"] == "failed":
            self.failed[key] += 1
        else:
            self.done[key] += 1
        if time.monotonic() - self._pushed >= PUSH_EVERY_S:
            self._push()
        if not self.live and time.monotonic() - self._last_log >= self.log_every_s:
            self._last_log = time.monotonic()
            for line in self.lines():
                self.console.print(line, highlight=False)

    def on_batches(self) -> None:
        """A model's batches changed state: shown at once (they change seldom), in place of a
        rate that means nothing while the answers wait at the provider."""
        for key, (label, _, _) in self.models.items():
            batches = self.state.batches.get(key)
            self.progress.update(
                self.ids[key],
                description=f"{label} ({batches})" if batches else label,
                in_batch=bool(batches),
            )
        if not self.live:
            self._last_log = time.monotonic()
            for line in self.lines():
                self.console.print(line, highlight=False)

    def lines(self) -> list[str]:
        """One plain line per model: done/total, this session's rate, and the time left at it;
        for a model whose tasks are in batches, what its batches are doing instead."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        out = []
        for key, (label, total, done_before) in self.models.items():
            done = self.done[key]
            rate = (done - done_before) / elapsed
            left = total - done
            eta = (
                "done" if left <= 0 else f"ETA {_clock(left / rate)}" if rate > 0 else "ETA unknown"
            )
            batches = self.state.batches.get(key)
            pace = f"in batch: {batches}" if batches else f"{rate:,.1f}/s, {eta}"
            out.append(
                f"progress {label}: {done:,}/{total:,} done, {pace}, "
                f"retries {self.state.retries[key]:,}, failed {self.failed[key]:,}"
            )
        return out


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

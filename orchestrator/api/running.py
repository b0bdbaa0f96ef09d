"""`orchestrator.run` and `orchestrator.arun`: a campaign run from Python, whether or not an event
loop is running in the caller's thread (a Jupyter cell runs inside one).

The run goes on in a worker thread with its own event loop and no signal handlers (only the main
thread may install them). The caller's thread waits for it and does what needs the caller: it
shows the progress (in a notebook, one display that updates in place) and prints what the run
says, so a notebook shows both under the cell that ran it. A KeyboardInterrupt there (the
kernel interrupted), or the cancelled task of `arun`, stops the run as Ctrl-C stops `orchestrator
run`: what is written stays, and running the same call again resumes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import sys
import threading
from collections.abc import Sequence
from os import PathLike
from typing import IO, TYPE_CHECKING, Any, cast

from rich.console import Console

from orchestrator.api.runs import Run
from orchestrator.api.starting import API_NAMES, ModelGiven, check_received, price_notes
from orchestrator.api.starting import starting_campaign as _starting
from orchestrator.errors import UserError
from orchestrator.spec.campaign import CampaignConfig, ModelConfig

if TYPE_CHECKING:
    from orchestrator.engine.progress import RunProgress
    from orchestrator.engine.state import RunState
    from orchestrator.session import RunOutcome
    from orchestrator.spec.campaign import Campaign

SHOW_EVERY_S = 0.25  # how often the caller's thread shows what the run said and its progress

Target = str | PathLike[str] | CampaignConfig


def run(
    config: Target,
    *,
    models: Sequence[ModelGiven] | None = None,
    samples: int | None = None,
    limit: int | None = None,
    output_dir: str | PathLike[str] | None = None,
    run_id: str | None = None,
    budget: float | None = None,
    trust_endpoints: bool = False,
    progress: bool = True,
) -> Run:
    """Run a campaign, or resume one, and return its `Run` when it ends; blocks until then.

    `config`: a campaign config file (TOML), a `Campaign` built or changed in code, or a run
    folder to resume (as it was started; no override may change it). Running the same call
    again skips the tasks already done, as `orchestrator run` does.

    The overrides are `orchestrator run`'s flags, and win over the config:
    `models` (each 'local', 'simulated', 'PRESET/NAME' such as 'openai/gpt-4o-mini', or a
    `Model`), `samples` (per condition), `limit` (items per experiment x condition),
    `output_dir`, `run_id` ('auto': named by the UTC date) and `budget` (USD for the whole run:
    a plan estimated above it is refused, and the run stops when its spend reaches it).
    `trust_endpoints`: resume a run folder someone else made even where its manifest sends
    your keys to hosts that are not a provider's own (else refused, naming them).
    `progress`: show the progress (a display that updates in place in a notebook, bars on a
    terminal, a line per model every 15 s elsewhere).

    Works with or without an event loop running in this thread (in Jupyter, in async code):
    the run goes on in a worker thread. A bad config raises `UserError` before anything is
    written. A KeyboardInterrupt (Ctrl-C, a notebook's interrupt) stops the run cleanly,
    keeping what is written, and is raised again; the same call resumes it. Failed tasks and
    a reached budget are said, not raised: `Run.status()` has the counts.
    """
    started = _Started.prepare(config, locals())
    return started.wait()


async def arun(
    config: Target,
    *,
    models: Sequence[ModelGiven] | None = None,
    samples: int | None = None,
    limit: int | None = None,
    output_dir: str | PathLike[str] | None = None,
    run_id: str | None = None,
    budget: float | None = None,
    trust_endpoints: bool = False,
    progress: bool = True,
) -> Run:
    """`run` as a coroutine, for asyncio (or trio) code: `await orchestrator.arun(...)`. The
    event loop stays free while the run goes on in its worker thread. Cancelling the task
    stops the run as a KeyboardInterrupt stops `run`: what is written stays, and the
    cancellation goes on."""
    started = _Started.prepare(config, locals())
    return await started.wait_async()


def _models(given: Any) -> list[ModelGiven] | None:
    """`models` as a list: one model alone is a list of it."""
    if given is None:
        return None
    if isinstance(given, str | ModelConfig):
        return [given]
    if not isinstance(given, list | tuple) or not all(
        isinstance(m, str | ModelConfig | dict) for m in given
    ):
        raise UserError(
            f"models is {given!r}",
            field="models",
            fix="give a list of models, each 'local', 'simulated', 'PRESET/NAME' or a Model",
        )
    return list(given)


def _folder(given: Any) -> str | None:
    if given is None:
        return None
    if not isinstance(given, str | PathLike):
        raise UserError(f"output_dir is {given!r}", field="output_dir", fix="give a folder's path")
    return str(given)


class _Relay(io.TextIOBase):
    """What the run's console writes in the worker thread, kept for the caller's thread to
    print: in a notebook, output from another thread may land under another cell."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._parts.append(text)
        return len(text)

    def take(self) -> str:
        with self._lock:
            text, self._parts = "".join(self._parts), []
        return text


def _task_cancelled() -> bool:
    """Whether the asyncio task this blocking call runs in is being cancelled (asyncio.run
    cancels its main task on Ctrl-C, and raises KeyboardInterrupt once it ends)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop running in this thread
        return False
    return task is not None and task.cancelling() > 0


def _in_notebook() -> bool:
    """Whether this is a Jupyter kernel (IPython's shell with a kernel behind it: Jupyter's,
    Colab's, VS Code's), where a display updates in place."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
    return getattr(shell, "kernel", None) is not None


class _Started:
    """A loaded campaign, its run going on in a worker thread, and what the caller's thread
    shows of it."""

    def __init__(self, campaign: Campaign, budget: float | None, progress: bool) -> None:
        self.campaign, self.budget, self.show_progress = campaign, budget, progress
        self.notebook = _in_notebook()
        self.relay = _Relay() if self.notebook else None
        # in a notebook the caller's thread prints what the run says; elsewhere rich does, from
        # the worker (it locks), on stderr, so that a script's own output stays apart
        self.console = (
            Console(
                file=cast("IO[str]", self.relay),
                width=100,
                color_system=None,
                soft_wrap=True,
                force_jupyter=False,
            )
            if self.relay is not None
            else Console(stderr=True)
        )
        self.stop = threading.Event()
        # set when the worker is done: waited on, not Thread.join, which a KeyboardInterrupt
        # can leave saying a thread that still runs has ended (Python 3.11, 3.12)
        self.done = threading.Event()
        self.shown: RunProgress | None = None
        self.display: Any = None
        self.outcome: RunOutcome | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._work, name="orchestrator-run", daemon=True)

    @classmethod
    def prepare(cls, config: Target, given: dict[str, Any]) -> _Started:
        """The campaign loaded and checked in the caller's thread: a bad config raises here,
        before anything is written."""
        overrides = {
            "models": _models(given["models"]),
            "samples": given["samples"],
            "items": given["limit"],
            "output_dir": _folder(given["output_dir"]),
            "run_id": given["run_id"],
        }
        budget = given["budget"]
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int | float) or not budget >= 0
        ):
            raise UserError(f"budget is {budget!r}", field="budget", fix="give USD, 0 or more")
        campaign = _starting(config, overrides, API_NAMES)
        started = cls(campaign, given["budget"], given["progress"])
        for note in price_notes(campaign):
            started.say(f"note: {note}")
        if campaign.run_dir is not None:  # a run folder resumed: its manifest names the hosts
            check_received(
                campaign,
                campaign.run_dir,
                given["trust_endpoints"],
                started.say,
                lambda text: started.say(f"note: {text}"),
                lambda question: None,  # nobody to ask: refused unless trusted
                trust_name="trust_endpoints=True",
            )
        return started

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self._show()

    def _progress(
        self, console: Console, models: dict[str, tuple[str, int, int]], state: RunState
    ) -> RunProgress:
        from orchestrator.engine.progress import RunProgress

        if not self.show_progress:
            console = Console(quiet=True)
        # in a notebook the caller's thread shows its lines in place: none printed every 15 s
        self.shown = RunProgress(
            console, models, state, log_every_s=math.inf if self.notebook else 15.0
        )
        return self.shown

    def _work(self) -> None:
        from orchestrator.session import run_campaign

        try:
            self.outcome = run_campaign(
                self.campaign,
                self.console,
                handle_signals=False,
                budget=self.budget,
                stop=self.stop,
                progress=self._progress,
            )
        except BaseException as exc:  # raised again in the caller's thread
            self.error = exc
        finally:
            self.done.set()

    def _show(self) -> None:
        """What the run said since, printed; the notebook's progress display, updated."""
        if self.relay is not None and (said := self.relay.take()):
            sys.stdout.write(said)
            sys.stdout.flush()
        if not (self.notebook and self.show_progress and self.shown is not None):
            return
        from IPython.display import Pretty, display

        lines = Pretty("\n".join(self.shown.lines()))
        if self.display is None:
            self.display = display(lines, display_id=True)
        else:
            self.display.update(lines)

    def wait(self) -> Run:
        self.thread.start()
        try:
            while not self.done.wait(SHOW_EVERY_S):
                self._show()
                if _task_cancelled():  # asyncio.run's answer to Ctrl-C: the task cancelled
                    raise asyncio.CancelledError
        except BaseException:  # interrupted, cancelled, or this thread failed: the run stops
            self._stop()
            raise
        return self._end()

    def _stop(self) -> None:
        """Stop the run as Ctrl-C does, and wait for it to end: results flushed, servers
        stopped. A second interrupt cannot cut that short; it is said what is going on."""
        self.stop.set()
        with contextlib.suppress(Exception):
            self.say("stopping: the calls in flight end, what is written stays...")
        while not self.done.is_set():
            try:
                self.done.wait(SHOW_EVERY_S)
            except KeyboardInterrupt:
                continue
        with contextlib.suppress(Exception):  # what stopped it is raised, not the run's end
            self._end()

    async def wait_async(self) -> Run:
        import anyio

        self.thread.start()
        try:
            # a thread waits for the end, so that this wakes as soon as the run ends
            while not await anyio.to_thread.run_sync(self.done.wait, SHOW_EVERY_S):
                self._show()
        except BaseException:  # cancelled, or interrupted: the run stops, then so does this
            self.stop.set()
            with anyio.CancelScope(shield=True):
                while not self.done.is_set():
                    await anyio.sleep(SHOW_EVERY_S)
            with contextlib.suppress(Exception):
                self._end()
            raise
        return self._end()

    def _end(self) -> Run:
        """The run's end said as `orchestrator run` says it; its error raised here."""
        self._show()
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        self._report(self.outcome)
        self._show()
        return Run(self.outcome.run_dir)

    def _report(self, outcome: RunOutcome) -> None:
        again = f"orchestrator.run({str(outcome.run_dir)!r})"
        results = outcome.run_dir / "results.ndjson"
        if outcome.already_complete:
            self.say(f"run already complete; no model was called. results: {results}")
            return
        counts = ", ".join(f"{n:,} {s}" for s, n in sorted(outcome.by_status.items()))
        self.say(f"wrote {counts or 'nothing new'}; results: {results}")
        state = outcome.state
        for key, message in state.fatal.items():
            self.say(f"model {key} stopped on a fatal error: {message}")
        if outcome.unsent:
            self.say(f"{outcome.unsent:,} task(s) of models in batch mode were not sent (above)")
        if outcome.in_flight:
            self.say(
                f"{outcome.in_flight:,} task(s) are in batches in flight; {again} collects them"
            )
        if outcome.by_status["too_long"]:
            self.say(
                f"{outcome.by_status['too_long']:,} request(s) were over the model's context "
                "length and hold no answer (status too_long)"
            )
        if state.budget_reached:
            self.say(
                f"budget reached: ${state.spend:,.4f} spent of ${self.budget:,.4f}; finished "
                f"results are saved. resume with a higher budget: "
                f"orchestrator.run({str(outcome.run_dir)!r}, budget=...)"
            )
        elif state.interrupted_by is not None:
            self.say(f"interrupted; finished results are saved. resume with: {again}")
        elif outcome.exit_code:
            self.say(f"some tasks failed; to retry them: {again}")

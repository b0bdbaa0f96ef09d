"""What stops a run part way, as the engine listens for it: SIGINT/SIGTERM in the main thread
(the command line), or an event set from another thread (the Python API, whose run goes on in a
worker thread where no signal handler can be installed). Either cancels the work's scope and
records why; what is written stays."""

from __future__ import annotations

import signal
import threading

import anyio
import anyio.abc

from orchestrator.engine.state import RunState


async def watch_signals(
    scope: anyio.CancelScope,
    state: RunState,
    *,
    task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The first SIGINT/SIGTERM stops the work; later ones are absorbed until the shutdown
    (flushing results, stopping servers) is over, so a second Ctrl-C cannot cut it short."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            if state.interrupted_by is None:
                state.interrupted_by = signum
                scope.cancel()


STOP_POLL_S = 0.05


async def watch_stop(
    scope: anyio.CancelScope,
    state: RunState,
    stop: threading.Event,
    *,
    task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED,
) -> None:
    """A stop asked from another thread (the Python API's caller: a KeyboardInterrupt in a
    notebook, a cancelled task) is a first Ctrl-C: the work stops, what is written stays."""
    task_status.started()
    while not stop.is_set():
        await anyio.sleep(STOP_POLL_S)
    if state.interrupted_by is None:
        state.interrupted_by = signal.SIGINT
        scope.cancel()

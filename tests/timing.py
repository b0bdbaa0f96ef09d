"""Test helpers for time: a virtual clock for the rate controller, and sliding-window counts.

On the virtual clock the controller runs unchanged on an asyncio loop whose time jumps to the
next timer whenever nothing is ready to run: minutes of traffic take milliseconds, and every
wake-up is exactly on time, so what a test checks is the controller's arithmetic, not how busy
the machine was.
"""

from __future__ import annotations

import asyncio
import random
import types
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from orchestrator.engine import limits

T = TypeVar("T")


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock only moves when every task waits for a timer."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        select = self._selector.select

        def jump(timeout: float | None = None):
            events = select(0)
            if not events and timeout:
                self.now += timeout  # straight to the earliest timer
            elif not events and timeout is None:
                raise RuntimeError("every task waits for something other than a timer")
            return events

        self._selector.select = jump

    def time(self) -> float:
        return self.now


@contextmanager
def virtual_clock(seed: int = 0) -> Iterator[VirtualTimeLoop]:
    """A virtual-time loop that the rate controller reads its clock from, with its pause jitter
    drawn from a seeded generator, for the duration of the block."""
    loop = VirtualTimeLoop()
    saved = limits.time, limits.random
    limits.time = types.SimpleNamespace(monotonic=loop.time)
    limits.random = random.Random(seed)
    try:
        yield loop
    finally:
        limits.time, limits.random = saved
        loop.close()


def run_virtually(scenario: Callable[[VirtualTimeLoop], Awaitable[T]], seed: int = 0) -> T:
    with virtual_clock(seed) as loop:
        return loop.run_until_complete(scenario(loop))


def most_in_any_window(times: list[float], period: float, limit: int) -> int:
    """The largest number of requests in any half-open window [t, t + period), counted as far
    as limit + 1 (more is a failure anyway)."""
    times = sorted(times)
    worst = min(len(times), limit)
    for i in range(len(times) - limit):
        if times[i + limit] - times[i] < period:
            return limit + 1
    return worst

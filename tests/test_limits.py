"""The rate controller on its own: on a virtual clock where exact times are asserted, and on a
real event loop (pytest-asyncio) where only lower bounds are."""

from __future__ import annotations

import time

import anyio
import pytest

from orchestrator.engine.limits import JITTER_S, SAFETY, KeyController, TokenWindow
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import RateInfo, RateLimited
from orchestrator.spec.limits import LimitConfig
from tests.timing import run_virtually, virtual_clock


def test_requests_get_evenly_spaced_slots():
    async def twenty(loop) -> list[float]:
        gate, times = KeyController(LimitConfig(rpm=50, period_s=1.0, max_in_flight=50)), []

        async def one() -> None:
            entry = await gate.acquire(10)
            times.append(loop.time())
            gate.release(entry, Completion("{}"))

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(one)
        return sorted(times)

    times = run_virtually(twenty)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # 50 per second, never closer than one slot: the window with its 1% and its fixed allowance
    assert gaps == pytest.approx([(1.0 * SAFETY + JITTER_S) / 50] * 19)


def test_a_token_window_says_when_old_charges_expire_and_settles_to_usage():
    with virtual_clock() as clock:
        window = TokenWindow(limit=100, period=0.3)
        first, _ = window.take(80)
        entry, wait = window.take(50)  # does not fit until the 80 expire
        assert entry is None and wait == pytest.approx(0.3)
        clock.now += wait
        entry, _ = window.take(50)
        window.settle(first, 10)  # already expired: harmless
        assert entry is not None and window.total == 50
        entry, _ = window.take(40)
        window.settle(entry, 5)
        assert window.total == pytest.approx(50 + 5)


async def test_a_429_pauses_the_key_and_halves_concurrency_then_it_recovers():
    gate = KeyController(LimitConfig(max_in_flight=8, rpm=600, period_s=1.0))
    entry = await gate.acquire(1)
    gate.release(entry, error=RateLimited("429", retry_after=0.2))
    assert gate.cap == 4 and gate.rate == pytest.approx(600 / (SAFETY + JITTER_S) / 2)
    started = time.monotonic()
    entry = await gate.acquire(1)
    assert time.monotonic() - started >= 0.2  # the whole key waited for Retry-After
    for _ in range(60):  # +1% of the ceiling per success
        gate.release(entry, Completion("{}"))
        entry = await gate.acquire(1)
    gate.release(entry, Completion("{}"))
    assert gate.cap == 8 and gate.rate == pytest.approx(
        600 / (SAFETY + JITTER_S)
    )  # grew back, capped


async def test_a_servers_reported_limit_is_adopted_before_any_429():
    gate = KeyController(LimitConfig(rpm=120, period_s=60.0))
    entry = await gate.acquire(1)
    gate.release(entry, Completion("{}", rate=RateInfo(limit_requests=60, remaining_requests=59)))
    assert gate.rate == pytest.approx(60 / 60 / 1.01)


async def test_a_reported_limit_is_read_per_minute_whatever_the_configured_window():
    gate = KeyController(LimitConfig(rpm=30000, period_s=3600))  # 8.25 requests/s configured
    entry = await gate.acquire(1)
    gate.release(entry, Completion("{}", rate=RateInfo(limit_requests=400, remaining_requests=300)))
    assert gate.rate == pytest.approx(400 / 60 / 1.01)  # 6.7/s, not 400 per hour

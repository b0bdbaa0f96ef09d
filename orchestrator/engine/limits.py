"""Rate control per limit key: request pacing, a token window, an adaptive in-flight cap.

- Requests: a pacer gives each request a time slot 1/rate after the previous slot, so that no
  sliding window of the configured length ever holds more than the configured count. A late
  wake-up does not push later slots back, so timer lateness costs no throughput (aiolimiter's
  leaky bucket either lets a burst through past a sliding-window limit or, at capacity 1, loses
  each wake-up's lateness: 93% of the allowed rate at 100 requests/s here). The rate adapts:
  it adopts a lower limit the server reports, halves on a 429 episode when the server's limit
  is unknown, and grows back additively on successes (AIMD).
- Tokens: a sliding-window account of estimated tokens (prompt estimate + max_tokens), corrected
  to the usage the server reports once the call returns.
- Concurrency: an in-flight cap that halves on a 429 episode and grows back by 1/cap per success.
- A 429's retry-after, or a server saying no requests or tokens remain, pauses the whole key.
  A slot that falls inside a pause is void: whoever held one takes a fresh slot after the pause,
  so the workers that waited do not all fire at its end. The same goes for a wait for tokens.
"""

from __future__ import annotations

import random
import time
from collections import deque

import anyio

from orchestrator.providers.base import Completion
from orchestrator.providers.errors import RateInfo, RateLimited
from orchestrator.spec.limits import LimitConfig

# Requests are spaced at just under the configured rate, so that network jitter between our send
# and the server's receipt cannot put R+1 requests into any window the server counts.
SAFETY = 1.01
# Both windows also get a fixed allowance: on a busy machine a send can leave tens of ms late,
# and a late request (with all its tokens) lands in the server's next window; 1% of a short
# window is less than that (1 s windows, as in the tests, had rare 429s from it, for requests
# and for tokens alike; 60 s windows lose 0.1% of their rate to it).
JITTER_S = 0.05
EPISODE_S = 1.0  # 429s within this long of the last cut are one episode: cut once, not per reply


class TokenWindow:
    """Tokens charged in the last `period` seconds stay within `limit`."""

    def __init__(self, limit: int, period: float) -> None:
        self.limit, self.period = limit, period
        self.entries: deque[list[float]] = deque()  # [time charged, tokens]
        self.total = 0.0

    def _expire(self, now: float) -> None:
        while self.entries and self.entries[0][0] <= now - self.period:
            entry = self.entries.popleft()
            self.total -= entry[1]
            entry[1] = 0.0  # spent: a late settle or refund must not subtract it again

    def take(self, tokens: float) -> tuple[list[float] | None, float]:
        """Charge `tokens` now if they fit: (the entry, 0.0); if not, (None, the seconds until
        enough will have expired). It never waits itself: the caller takes a fresh request slot
        after any wait."""
        tokens = min(tokens, self.limit)
        now = time.monotonic()
        self._expire(now)
        if self.total + tokens <= self.limit:
            entry = [now, tokens]
            self.entries.append(entry)
            self.total += tokens
            return entry, 0.0
        need, wait = self.total + tokens - self.limit, self.period
        for charged_at, amount in self.entries:  # when enough will have expired
            need -= amount
            if need <= 0:
                wait = charged_at + self.period - now
                break
        return None, max(wait, 0.001)

    def settle(self, entry: list[float], actual: float) -> None:
        """Replace an estimate by what the server reported, counted from now: the server admitted
        the call before we heard back, so its charge expires there before ours does here."""
        now = time.monotonic()
        self.total -= entry[1]
        entry[1] = 0.0  # stays in place, empty, until it expires
        if entry[0] > now - self.period:  # an expired charge has left the server's window too
            self.entries.append([now, actual])
            self.total += actual

    def refund(self, entry: list[float]) -> None:
        """The server turned the call away (429): it charged nothing."""
        self.total -= entry[1]
        entry[1] = 0.0


class KeyController:
    def __init__(self, config: LimitConfig) -> None:
        self.config = config
        # Charges expire a little later here than at the server, for the same reason as above.
        self.tokens = (
            TokenWindow(config.tpm, config.period_s * SAFETY + JITTER_S) if config.tpm else None
        )
        self.cap = float(config.max_in_flight)
        self.in_flight = 0
        self._freed = anyio.Event()
        self._waiting = 0  # workers held back by the in-flight cap
        self.rate: float | None = self._configured_rate()  # requests/s now; None: unpaced
        self.server_rate: float | None = None  # the limit the server reports, as requests/s
        self._next_slot = 0.0
        self.paused_until = 0.0
        self._last_cut = -EPISODE_S

    async def acquire(self, est_tokens: float) -> list[float] | None:
        """Wait for a slot under every limit; returns the token-window entry to correct later."""
        while self.in_flight >= int(self.cap):
            self._waiting += 1
            try:
                await self._freed.wait()
            finally:
                self._waiting -= 1
        self.in_flight += 1
        try:
            while True:
                now = time.monotonic()
                slot = max(now, self.paused_until)
                if self.rate is not None:
                    slot = max(slot, self._next_slot)
                    self._next_slot = slot + 1 / self.rate
                if slot > now:
                    await anyio.sleep(slot - now)
                if slot < self.paused_until:
                    continue  # a pause began while this one waited: its slot is void
                if self.tokens is None:
                    return None
                entry, wait = self.tokens.take(est_tokens)
                if entry is not None:
                    return entry
                await anyio.sleep(wait)  # then a fresh slot, or all who waited would go at once
        except BaseException:
            self._leave()
            raise

    def _leave(self) -> None:
        self.in_flight -= 1
        if self._waiting:  # events cost microseconds; only make one when someone waits
            self._freed.set()
            self._freed = anyio.Event()

    def release(
        self,
        entry: list[float] | None,
        completion: Completion | None = None,
        error: BaseException | None = None,
    ) -> None:
        self._leave()
        if completion is not None:
            self._on_success(entry, completion)
        elif isinstance(error, RateLimited):
            if entry is not None and self.tokens is not None:
                self.tokens.refund(entry)
            self._on_rate_limited(error)

    def _configured_rate(self) -> float | None:
        cfg = self.config
        return cfg.rpm / (cfg.period_s * SAFETY + JITTER_S) if cfg.rpm else None

    def _ceiling(self) -> float | None:
        """The fastest this key may go: the configured rate, or the server's if it said less."""
        configured = self._configured_rate()
        if self.server_rate is None:
            return configured
        return self.server_rate if configured is None else min(configured, self.server_rate)

    def _on_success(self, entry: list[float] | None, completion: Completion) -> None:
        cfg = self.config
        if self.cap < cfg.max_in_flight:
            self.cap = min(float(cfg.max_in_flight), self.cap + 1 / self.cap)
        if self.rate is not None:  # additive increase, up to the ceiling
            ceiling = self._ceiling()
            self.rate = min(ceiling, self.rate + ceiling * 0.01) if ceiling else None
        usage = completion.usage or {}
        if entry is not None and self.tokens is not None and usage.get("prompt_tokens") is not None:
            self.tokens.settle(
                entry, (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
            )
        if completion.rate is not None:
            self._respect(completion.rate)

    def _respect(self, rate: RateInfo) -> None:
        """Slow down before a 429: adopt a lower request limit the server reports, and when
        nothing is left in its window, wait for the reset."""
        if rate.limit_requests:
            # Providers state their request limit per minute, whatever window our config uses.
            server_rate = rate.limit_requests / 60.0 / SAFETY
            configured = self._configured_rate()
            if self.server_rate != server_rate and (configured is None or server_rate < configured):
                self.server_rate = server_rate
                self.rate = min(self.rate or server_rate, server_rate)
        now, longest = time.monotonic(), self.config.max_pause_s
        if rate.remaining_requests == 0 and rate.reset_requests_s:
            self._pause(now + min(rate.reset_requests_s, longest))
        if (
            rate.remaining_tokens is not None
            and rate.reset_tokens_s
            and rate.remaining_tokens < self.config.min_tokens_left
        ):
            self._pause(now + min(rate.reset_tokens_s, longest))

    def _pause(self, until: float) -> None:
        """Hold the whole key until `until`. The pacer restarts after the pause: the slots it gave
        out inside the pause are void, and their holders queue up again behind this point."""
        if until > self.paused_until:
            self.paused_until = until
            self._next_slot = max(self._next_slot, until)

    def _on_rate_limited(self, error: RateLimited) -> None:
        now = time.monotonic()
        pause = error.retry_after if error.retry_after is not None else self.config.backoff_base_s
        pause = min(pause, self.config.max_pause_s)  # a longer hint stops the model (runner)
        self._pause(now + pause * random.uniform(1.0, 1.1))
        if now - self._last_cut < EPISODE_S:
            return
        self._last_cut = now
        self.cap = max(1.0, self.cap / 2)
        if error.rate is not None:
            self._respect(error.rate)
        ceiling = self._ceiling()
        if self.server_rate is not None:  # its limit is known: keep to it, the pause did the rest
            self.rate = ceiling
        elif ceiling is not None:  # unknown limit: multiplicative decrease
            self.rate = max(ceiling * 0.02, (self.rate or ceiling) / 2)

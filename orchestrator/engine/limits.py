"""Per limit key: a request-rate limiter; the in-flight cap is the key's worker count."""
from __future__ import annotations

from aiolimiter import AsyncLimiter

from orchestrator.spec.campaign import LimitConfig

# Requests are spaced evenly at just under the configured rate, so that network jitter between
# our send and the server's receipt cannot put R+1 requests into any window the server counts.
_SAFETY = 1.01


class RateGate:
    def __init__(self, config: LimitConfig) -> None:
        self.config = config
        self._limiter = (AsyncLimiter(1, config.period_s / config.rpm * _SAFETY)
                         if config.rpm else None)

    async def wait(self) -> None:
        if self._limiter is not None:
            await self._limiter.acquire()

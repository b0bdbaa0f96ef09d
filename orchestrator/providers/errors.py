"""The few errors a provider may raise, and the rate-limit facts servers report; the engine owns
what happens next."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateInfo:
    """What a server said about its limits (any field may be unknown)."""

    limit_requests: int | None = None
    remaining_requests: int | None = None
    reset_requests_s: float | None = None
    limit_tokens: int | None = None
    remaining_tokens: int | None = None
    reset_tokens_s: float | None = None


class ProviderError(Exception):
    """Base of the errors the engine understands."""

    def __init__(
        self, message: str, retry_after: float | None = None, rate: RateInfo | None = None
    ) -> None:
        super().__init__(message)
        # Only a finite, non-negative wait is a hint (the test is false for NaN and inf).
        self.retry_after = (
            retry_after if retry_after is not None and 0 <= retry_after < math.inf else None
        )
        self.rate = rate


class RateLimited(ProviderError):
    """429, or an overloaded server (503/529): slow down, retry after `retry_after` if given."""


class Transient(ProviderError):
    """5xx, timeout, dropped connection, garbled body: worth another try."""


class Unreachable(Transient):
    """No connection at all (unknown host, connection refused): retried like any transient
    error, but a task that exhausts its retries this way stops its model, since every other
    task would spend its whole backoff schedule the same way."""


class Fatal(ProviderError):
    """Bad key, bad request, unknown model, quota used up: retrying cannot help, and no other
    task of the model would fare better, so the model stops. The message names the fix."""


class TooLong(ProviderError):
    """The server would not take this one request (its prompt is over the context length): a
    final outcome for this task, neither retried nor a reason to stop the model."""


class Refused(ProviderError):
    """The model declined or a safety filter blocked the answer: an outcome, not retried."""

"""The few errors a provider may raise, and the rate-limit facts servers report; the engine owns
what happens next."""
from __future__ import annotations

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

    def __init__(self, message: str, retry_after: float | None = None,
                 rate: RateInfo | None = None) -> None:
        super().__init__(message)
        self.retry_after, self.rate = retry_after, rate


class RateLimited(ProviderError):
    """429, or an overloaded server (503/529): slow down, retry after `retry_after` if given."""


class Transient(ProviderError):
    """5xx, timeout, dropped connection, garbled body: worth another try."""


class Fatal(ProviderError):
    """Bad key, bad request, unknown model: retrying cannot help. The message names the fix."""


class Refused(ProviderError):
    """The model declined or a safety filter blocked the answer: an outcome, not retried."""

"""The few errors a provider may raise; the engine owns what happens next."""
from __future__ import annotations


class ProviderError(Exception):
    """Base of the errors the engine understands."""


class RateLimited(ProviderError):
    """The server said 429 (or overloaded); retry after `retry_after` seconds when given."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Transient(ProviderError):
    """5xx, timeout, dropped connection: worth another try."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Fatal(ProviderError):
    """Bad key, bad request, unknown model: retrying cannot help."""


class Refused(ProviderError):
    """The model declined or a safety filter blocked the answer: an outcome, not retried."""

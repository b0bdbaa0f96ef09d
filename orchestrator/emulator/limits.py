"""Server-side limits: sliding windows of requests and tokens per credential, as providers keep."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field


@dataclass
class Verdict:
    admitted: bool
    retry_after_s: float = 0.0
    entry: list[float] | None = None


@dataclass
class Window:
    rpm: int | None
    tpm: int | None
    period_s: float
    requests: deque = field(default_factory=deque)  # admission times
    tokens: deque = field(default_factory=deque)  # [time, tokens]
    token_total: float = 0.0

    def _expire(self, now: float) -> None:
        edge = now - self.period_s
        while self.requests and self.requests[0] <= edge:
            self.requests.popleft()
        while self.tokens and self.tokens[0][0] <= edge:
            self.token_total -= self.tokens.popleft()[1]

    def admit(self, cost: float) -> Verdict:
        """Admit a request charging `cost` tokens, or say how long until it would fit."""
        now = time.monotonic()
        self._expire(now)
        wait = 0.0
        if self.rpm is not None and len(self.requests) >= self.rpm:
            wait = self.requests[len(self.requests) - self.rpm] + self.period_s - now
        if self.tpm is not None and self.token_total + cost > self.tpm:
            need = self.token_total + cost - self.tpm
            for charged_at, amount in self.tokens:
                need -= amount
                if need <= 0:
                    wait = max(wait, charged_at + self.period_s - now)
                    break
            else:
                wait = max(wait, self.period_s)
        if wait > 0:
            return Verdict(False, wait)
        self.requests.append(now)
        entry = None
        if self.tpm is not None:
            entry = [now, cost]
            self.tokens.append(entry)
            self.token_total += cost
        return Verdict(True, entry=entry)

    def settle(self, entry: list[float] | None, actual: float) -> None:
        """Charge what the call really used once it is known (unused max_tokens come back)."""
        if entry is not None and entry in self.tokens:
            self.token_total += actual - entry[1]
            entry[1] = actual

    def remaining(self) -> tuple[int | None, float, int | None, float]:
        """(requests left, seconds until one more frees, tokens left, seconds until the oldest
        token charge expires)."""
        now = time.monotonic()
        self._expire(now)
        req_left = None if self.rpm is None else max(0, self.rpm - len(self.requests))
        req_reset = (self.requests[0] + self.period_s - now) if self.requests else 0.0
        tok_left = None if self.tpm is None else max(0, int(self.tpm - self.token_total))
        tok_reset = (self.tokens[0][0] + self.period_s - now) if self.tokens else 0.0
        return req_left, max(0.0, req_reset), tok_left, max(0.0, tok_reset)

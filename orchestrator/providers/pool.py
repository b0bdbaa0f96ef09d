"""An endpoint pool: several servers of one served model (replicas) behind one provider.

Each call goes to the endpoint with the fewest calls in flight; the pool sits inside the model's
rate gate, so the limit key's pacing and in-flight cap hold for the pool as a whole.

- A call that cannot connect (nothing reached the server, nothing was paid) moves at once to the
  next endpoint, within the same attempt.
- An endpoint that fails to connect SET_ASIDE_AFTER times in a row is set aside: no call goes
  there until its probe time, when one call at a time may try it again (a call that then fails
  to connect moves on as above). Each failed probe doubles the wait, up to PROBE_MAX_S; the first
  call it answers brings it back.
- Any other failed attempt (a timeout, a dropped connection, a 5xx) is the engine's to retry, and
  its retry goes to another endpoint than the ones that failed this task.
- Every completion says which endpoint answered (`Completion.endpoint`, a result's `endpoint`).

Endpoints may change while a run goes on (a Ray replica restarted on a new port: `replace`).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from orchestrator.plan import Task
from orchestrator.providers.base import Completion, Provider
from orchestrator.providers.errors import ProviderError, Unreachable

SET_ASIDE_AFTER = 3  # connection failures in a row
PROBE_FIRST_S = 1.0
PROBE_MAX_S = 30.0
_REMEMBERED = 100_000  # tasks whose failed endpoints are kept for their retries (a bound)


@dataclass(eq=False)
class Endpoint:
    url: str
    client: Provider
    in_flight: int = 0
    failures: int = 0  # connection failures in a row
    back_at: float = 0.0  # set aside until then (monotonic seconds); 0: in use
    probing: bool = False  # a call is trying it after it was set aside

    def usable(self, now: float) -> bool:
        return self.failures < SET_ASIDE_AFTER or (now >= self.back_at and not self.probing)


class EndpointPool:
    """A Provider over `endpoints` (url, client). `say` tells the user when one is set aside or
    comes back."""

    def __init__(self, label: str, endpoints: list[tuple[str, Provider]],
                 say: Callable[[str], None] | None = None) -> None:
        self.label = label
        self.endpoints = [Endpoint(url, client) for url, client in endpoints]
        self.retired: list[Provider] = []  # clients of replaced endpoints, closed at the end
        self._say = say or (lambda _: None)
        self._failed: dict[str, set[str]] = {}  # task id -> endpoints whose attempt failed

    async def start(self) -> None:
        for endpoint in self.endpoints:
            await endpoint.client.start()

    def replace(self, old_url: str, url: str, client: Provider) -> None:
        """Put a new endpoint where `old_url` was (a replica back on a new address)."""
        for i, endpoint in enumerate(self.endpoints):
            if endpoint.url == old_url:
                self.retired.append(endpoint.client)
                self.endpoints[i] = Endpoint(url, client)
                self._say(f"{self.label}: endpoint {old_url} replaced by {url}")
                return
        self.endpoints.append(Endpoint(url, client))

    def _pick(self, avoid: set[str], tried: set[str]) -> Endpoint | None:
        """The least busy usable endpoint not yet tried in this attempt, preferring those that
        have not failed this task."""
        now = time.monotonic()
        choices = [e for e in self.endpoints if e.url not in tried and e.usable(now)]
        fresh = [e for e in choices if e.url not in avoid]
        if not (fresh or choices):
            return None
        return min(fresh or choices, key=lambda e: e.in_flight)

    def _set_aside(self, endpoint: Endpoint) -> None:
        endpoint.failures += 1
        if endpoint.failures >= SET_ASIDE_AFTER:
            wait = min(PROBE_MAX_S, PROBE_FIRST_S * 2 ** (endpoint.failures - SET_ASIDE_AFTER))
            endpoint.back_at = time.monotonic() + wait
            self._say(f"{self.label}: endpoint {endpoint.url} cannot be reached "
                      f"({endpoint.failures} times in a row); set aside, tried again in {wait:g} s")

    def _answered(self, endpoint: Endpoint) -> None:
        if endpoint.failures >= SET_ASIDE_AFTER:
            self._say(f"{self.label}: endpoint {endpoint.url} answers again")
        endpoint.failures, endpoint.back_at = 0, 0.0

    async def _call(self, task: Task, call: Callable[[Provider], Awaitable[Completion]]) -> Completion:
        avoid = self._failed.get(task.task_id, set())
        tried: set[str] = set()
        last: Unreachable | None = None
        while (endpoint := self._pick(avoid, tried)) is not None:
            tried.add(endpoint.url)
            probe = endpoint.failures >= SET_ASIDE_AFTER
            endpoint.in_flight += 1
            endpoint.probing = endpoint.probing or probe
            try:
                completion = await call(endpoint.client)
            except Unreachable as exc:
                self._set_aside(endpoint)
                last = exc
                continue  # nothing reached a server: the next endpoint, in this same attempt
            except ProviderError:  # the engine retries it (or not): elsewhere, if it does
                if len(self._failed) < _REMEMBERED:
                    self._failed.setdefault(task.task_id, set()).add(endpoint.url)
                raise
            finally:
                endpoint.in_flight -= 1
                if probe:
                    endpoint.probing = False
            self._answered(endpoint)
            if avoid:
                self._failed.pop(task.task_id, None)
            return dataclasses.replace(completion, endpoint=endpoint.url)
        if last is not None:
            raise last
        raise Unreachable(f"every endpoint of {self.label} is set aside after failing to connect; "
                          "each is tried again after its wait\n  fix: check that the servers are "
                          "up, then run again to resume")

    async def complete(self, task: Task) -> Completion:
        return await self._call(task, lambda client: client.complete(task))

    async def score(self, task: Task, text: str, continuation: str) -> Completion:
        return await self._call(task, lambda client: client.score(task, text, continuation))

    async def aclose(self) -> None:
        for client in [e.client for e in self.endpoints] + self.retired:
            await client.aclose()

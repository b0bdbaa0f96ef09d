"""An endpoint pool: several servers of one served model (replicas) behind one provider.

Each call goes to the endpoint with the fewest calls in flight; the pool sits inside the model's
rate gate, so the limit key's pacing and in-flight cap hold for the pool as a whole.

- A call that cannot connect (nothing reached the server, nothing was paid) moves at once to the
  next endpoint, within the same attempt.
- An endpoint that fails to connect SET_ASIDE_AFTER times in a row is set aside: no call goes
  there until its probe time, when one call at a time may try it again (a call that then fails
  to connect moves on as above). Each failed probe doubles the wait, up to PROBE_MAX_S; calls
  that were already on their way when it was set aside change nothing. The first call it
  answers brings it back. When every endpoint is set aside, the attempt fails as unreachable
  with the time to the first probe as its retry hint: the engine's retry waits for it.
- Any other failed attempt (a timeout, a dropped connection, a 5xx) is the engine's to retry, and
  its retry goes to another endpoint than the ones that failed this task.
- Every completion says which endpoint answered (`Completion.endpoint`, a result's `endpoint`).

Endpoints may change while a run goes on (a Ray replica restarted on a new port: `replace`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import monotonic

import anyio

from orchestrator.plan import Task
from orchestrator.providers.base import Completion, Provider
from orchestrator.providers.errors import RateLimited, Transient, Unreachable

SET_ASIDE_AFTER = 3  # connection failures in a row
PROBE_FIRST_S = 1.0
PROBE_MAX_S = 30.0
_REMEMBERED = 100_000  # tasks whose failed endpoints are kept for their retries (a bound)


@dataclass(eq=False)
class Endpoint:
    url: str
    client: Provider
    in_flight: int = 0
    failures: int = 0  # connection failures in a row, while in use
    aside: bool = False
    wait_s: float = 0.0  # between probes, while set aside
    back_at: float = 0.0  # its next probe (monotonic seconds), while set aside
    probing: bool = False  # a call is trying it after it was set aside
    probed: anyio.Event | None = None  # set when that call is over

    def usable(self, now: float) -> bool:
        return not self.aside or (now >= self.back_at and not self.probing)


class EndpointPool:
    """A Provider over `endpoints` (url, client). `say` tells the user when one is set aside or
    comes back."""

    def __init__(
        self,
        label: str,
        endpoints: list[tuple[str, Provider]],
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.label = label
        self.endpoints = [Endpoint(url, client) for url, client in endpoints]
        self.retired: list[Provider] = []  # clients of replaced endpoints, closed at the end
        self._say = say or (lambda _: None)
        self._failed: dict[str, set[str]] = {}  # task id -> endpoints whose attempt failed
        self._turn = 0  # where the search for the least busy starts: ties take turns

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
        now, n = monotonic(), len(self.endpoints)
        self._turn = (self._turn + 1) % n
        turned = self.endpoints[self._turn :] + self.endpoints[: self._turn]
        choices = [e for e in turned if e.url not in tried and e.usable(now)]
        fresh = [e for e in choices if e.url not in avoid]
        if not (fresh or choices):
            return None
        return min(fresh or choices, key=lambda e: e.in_flight)

    def revive(self, url: str) -> None:
        """The server at `url` is known to be back (a replica restarted on the same address)."""
        for endpoint in self.endpoints:
            if endpoint.url == url:
                self._answered(endpoint)

    def _refused(self, endpoint: Endpoint, probe: bool) -> None:
        now = monotonic()
        if probe and endpoint.aside:  # still down: wait twice as long before the next probe
            endpoint.wait_s = min(PROBE_MAX_S, endpoint.wait_s * 2)
            endpoint.back_at = now + endpoint.wait_s
        elif not endpoint.aside:
            endpoint.failures += 1
            if endpoint.failures >= SET_ASIDE_AFTER:
                endpoint.aside, endpoint.wait_s = True, PROBE_FIRST_S
                endpoint.back_at = now + PROBE_FIRST_S
                self._say(
                    f"{self.label}: endpoint {endpoint.url} cannot be reached "
                    f"({endpoint.failures} times in a row); set aside, tried again in "
                    f"{PROBE_FIRST_S:g} s, then less and less often"
                )

    def _answered(self, endpoint: Endpoint) -> None:
        if endpoint.aside:
            self._say(f"{self.label}: endpoint {endpoint.url} answers again")
        endpoint.failures, endpoint.aside, endpoint.wait_s, endpoint.back_at = 0, False, 0.0, 0.0

    def _remember(self, task_id: str, url: str) -> None:
        """That `url` failed this task, for its retry (a bounded memory: the oldest go first)."""
        if task_id not in self._failed and len(self._failed) >= _REMEMBERED:
            del self._failed[next(iter(self._failed))]
        self._failed.setdefault(task_id, set()).add(url)

    async def _call(
        self, task: Task, call: Callable[[Provider], Awaitable[Completion]]
    ) -> Completion:
        avoid = self._failed.get(task.task_id, set())
        tried: set[str] = set()
        last: Unreachable | None = None
        while True:
            endpoint = self._pick(avoid, tried)
            if endpoint is None:
                probing = [e for e in self.endpoints if e.probing and e.url not in tried]
                if not probing:
                    break
                await probing[0].probed.wait()  # its outcome may bring it back: then it is ours
                continue
            tried.add(endpoint.url)
            probe = endpoint.aside
            endpoint.in_flight += 1
            if probe:
                endpoint.probing, endpoint.probed = True, anyio.Event()
            try:
                completion = await call(endpoint.client)
            except Unreachable as exc:
                self._refused(endpoint, probe)
                last = exc
                continue  # nothing reached a server: the next endpoint, in this same attempt
            except (Transient, RateLimited):  # the engine retries it: elsewhere
                self._remember(task.task_id, endpoint.url)
                if probe:  # not back yet either: the next probe after a longer wait
                    self._refused(endpoint, probe)
                raise
            finally:
                endpoint.in_flight -= 1
                if probe:
                    endpoint.probing = False
                    endpoint.probed.set()
            self._answered(endpoint)
            if avoid:
                self._failed.pop(task.task_id, None)
            return dataclasses.replace(completion, endpoint=endpoint.url)
        if last is not None and any(not e.aside for e in self.endpoints):
            raise last
        # All set aside: the engine's retry waits for the first probe (its backoff_max_s at most).
        soonest = min((e.back_at for e in self.endpoints), default=0.0)
        raise Unreachable(
            f"every endpoint of {self.label} is set aside after failing to connect"
            "\n  fix: check that the servers are up, then run again to resume",
            retry_after=max(0.0, soonest - monotonic()),
        )

    async def complete(self, task: Task) -> Completion:
        return await self._call(task, lambda client: client.complete(task))

    async def score(self, task: Task, text: str, continuation: str) -> Completion:
        return await self._call(task, lambda client: client.score(task, text, continuation))

    async def aclose(self) -> None:
        for client in [e.client for e in self.endpoints] + self.retired:
            await client.aclose()

"""The local provider's llama.cpp server processes, started, checked and restarted when they die.

- At start, each server must answer `/v1/models` and then complete one token
  (serving/llama.py): a build that crashes on inference stops the run before its first task, with
  exit 2 and the crash in words (the signal, the server's last lines, a fix for the cause).
- A server found dead mid-run (its process has ended) is restarted on a new port, at most
  `max_restarts` times per slot, with a message each time; the pool's endpoint moves to it.
  The calls it was answering fail as transient and the engine retries them: each task's result
  is still written once, since a task's record is written only when it has its final outcome.
- Past the bound, the model stops with a Fatal error saying how the server ended and what to
  do: a server that dies on every request does not loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
import anyio

from orchestrator.providers.errors import Fatal
from orchestrator.serving.llama import LlamaServer, LocalServerError

# How long a failed call waits for its server's exit to show: a dropped connection is seen
# before the process can be reaped.
EXIT_GRACE_S = 0.5


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))


class Supervisor:
    """`make_server()` builds one server (not yet started); `replace(old_url, new_url)` moves
    the pool's endpoint; `say` tells the user."""

    def __init__(
        self,
        label: str,
        slots: int,
        make_server: Callable[[], LlamaServer],
        max_restarts: int,
        say: Callable[[str], None],
    ) -> None:
        self.label, self.make_server, self.max_restarts, self.say = (
            label,
            make_server,
            max_restarts,
            say,
        )
        # Each slot's server; the one there is always the one the pool calls, or a dead one.
        self.servers = [make_server() for _ in range(slots)]
        self.restarts = [0] * slots
        self.replace: Callable[[str, str], Awaitable[None]] | None = None
        self.fatal: Fatal | None = None
        self._lock = anyio.Lock()

    async def start(self) -> list[str]:
        """Start every server side by side; their base URLs once each has completed a token."""
        try:
            async with _session() as session, anyio.create_task_group() as tg:
                for server in self.servers:
                    tg.start_soon(server.start, session)
        except BaseExceptionGroup as group:  # report the first server's problem, not a group
            raise group.exceptions[0] from None
        return [server.url for server in self.servers]

    def _dead(self) -> bool:
        return any(server.ended() is not None for server in self.servers)

    async def recover(self, grace_s: float = 0.0) -> bool:
        """Restart every server that has died (waiting up to `grace_s` for a death to show);
        True if one had. Raises the model's Fatal error once a slot is past its bound."""
        if self.fatal is not None:
            raise self.fatal
        with anyio.move_on_after(grace_s):
            while not self._dead() and grace_s > 0:
                await anyio.sleep(0.02)
        if not self._dead() and not self._lock.locked():
            return False
        # One restart per death, however many calls saw it; the others wait for it here, so
        # that none goes to the dead server's address meanwhile.
        async with self._lock:
            for slot in range(len(self.servers)):
                await self._revive(slot)
        return True

    async def _revive(self, slot: int) -> None:
        if self.fatal is not None:
            raise self.fatal
        when, in_pool = "mid-run", self.servers[slot].url
        while (server := self.servers[slot]).ended() is not None:
            message, fix = server.crash(when)
            server.stop()
            self.restarts[slot] += 1
            if self.restarts[slot] > self.max_restarts:
                self.fatal = Fatal(
                    f"{self.label}: {message}\n  it was restarted {self.max_restarts} time(s) "
                    f"already and is not restarted again\n  fix: {fix}"
                )
                raise self.fatal
            self.say(
                f"{self.label}: {message}\n  restarting it ({self.restarts[slot]} of at most "
                f"{self.max_restarts}); the calls it was answering are retried"
            )
            self.servers[slot] = fresh = self.make_server()
            when = "after it was restarted"
            try:
                async with _session() as session:
                    await fresh.start(session)
                if self.replace is not None:
                    await self.replace(in_pool, fresh.url)
            except (LocalServerError, aiohttp.ClientError, TimeoutError, OSError) as exc:
                if fresh.ended() is None:  # alive but not answering: no use restarting it
                    fresh.stop()
                    self.fatal = Fatal(f"{self.label}: after a crash, {exc}")
                    raise self.fatal from None
                continue  # it died again: counted, and restarted within the bound
            self.say(f"{self.label}: the server is back, on {fresh.url}")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

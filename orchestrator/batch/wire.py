"""What the three batch clients share: the online provider they wrap (its bodies, its reading of
an answer, its classification of errors, its session and its key scrubbing), retries of the
batch API's own calls, and JSONL read as it streams in. `batch_api` picks the client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import orjson
from multidict import CIMultiDict, CIMultiDictProxy
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from orchestrator.batch.api import BatchLimits, Item, Unconfirmed
from orchestrator.providers.errors import Fatal, RateLimited, Transient
from orchestrator.providers.http import MAX_ANSWER_BYTES, HTTPProvider
from orchestrator.providers.safety import decoded, origin

MB = 2**20
T = TypeVar("T")
NO_HEADERS = CIMultiDictProxy(CIMultiDict())
# A batch's creation time is the provider's clock, `since` is ours: a clock this far behind
# still finds its batch.
CLOCK_SKEW_S = 300.0


def moment(value: Any) -> float | None:
    """A creation time as the providers write it (Unix seconds, RFC 3339), in Unix seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def timestamp(since: datetime) -> float:
    return (since if since.tzinfo else since.replace(tzinfo=UTC)).timestamp()


class BatchClient:
    names_batches = True
    """A batch API spoken on the wrapped online provider's session: the same key, headers,
    bodies and error classes as its online calls."""

    limits: BatchLimits
    turnaround = "within 24 hours"
    attempts = 4  # of each batch API call (not of an item: a failed item is the runner's)
    wait_s, max_wait_s = 0.5, 30.0  # backoff doubles from wait_s, or waits as the server asks
    chunk_bytes = 1 << 20  # of a request body streamed from the input file

    def __init__(self, provider: HTTPProvider) -> None:
        self.provider = provider

    async def forget_input(self, file_id: str | None) -> bool:
        return True  # no file was uploaded: the batch's requests went in its create call

    # --- items as the online protocol reads them -----------------------------------------------
    def answered(self, custom_id: str, status: int, body: Any) -> Item:
        """An item answered `status` with `body` (a decoded JSON value), read as the online
        call reads the same answer: a completion, or the exception it would have raised."""
        payload = orjson.dumps(body)
        try:
            if status == 200:
                return Item(custom_id, completion=self.provider.answer(payload, NO_HEADERS))
            return Item(custom_id, error=self.provider.error(status, NO_HEADERS, payload))
        except Exception as exc:  # Refused, a malformed body (Transient)
            return Item(custom_id, error=exc)

    def unanswered(self, custom_id: str, why: str) -> Item:
        """Expired or canceled before it was processed: it goes back to pending."""
        return Item(
            custom_id, error=Transient(self.provider.scrub(f"{why} (batch item {custom_id})"))
        )

    # --- calls, retried ------------------------------------------------------------------------
    def _wait(self, state: Any) -> float:
        hint = getattr(state.outcome.exception(), "retry_after", None)
        backoff = self.wait_s * 2 ** (state.attempt_number - 1)
        return min(self.max_wait_s, hint if hint is not None else backoff)

    async def retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """`call` again after a transient failure or a rate limit, a few times."""
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type((Transient, RateLimited)),
            stop=stop_after_attempt(self.attempts),
            wait=self._wait,
            reraise=True,
        ):
            with attempt:
                return await call()
        raise AssertionError("unreachable")

    async def json(
        self,
        method: str,
        url: str,
        body: Any = None,
        data: Any = None,
        headers: dict[str, str] | None = None,
        retry: bool = True,
    ) -> dict[str, Any]:
        """A JSON answer to one call, or the error the online protocol would raise for it.
        `data`: a body made anew for each attempt (a callable)."""

        async def once() -> dict[str, Any]:
            sent = data() if callable(data) else (orjson.dumps(body) if body is not None else None)
            status, got, payload = await self.provider.send(method, url, sent, headers)
            if status != 200:
                raise self.provider.error(status, got, payload)
            try:
                value = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise self.provider.malformed(payload) from None
            if not isinstance(value, dict):
                raise self.provider.malformed(payload)
            return value

        return await (self.retrying(once) if retry else once())

    async def create_once(
        self,
        create: Callable[[], Awaitable[str]],
        name: str,
        count: int,
        known: frozenset[str] = frozenset(),
    ) -> str:
        """Create a batch and return its id, never twice: after a failure the request may have
        been acted on all the same (the answer lost on the way), so the provider is asked for
        the batch (but those in `known`, the run's own) before trying again."""
        since = datetime.now(UTC)
        for attempt in range(1, self.attempts + 1):
            try:
                return await create()
            except (Transient, RateLimited) as exc:
                found = await self.find(name, since, count, known)
                if found and self.names_batches:
                    return found[0]
                if found:  # one of these may be ours: only its results will tell (settle.py)
                    raise Unconfirmed(
                        f"the create request failed, and {len(found)} batch(es) of "
                        "this size were made since"
                    ) from None
                if attempt == self.attempts:
                    raise
                await asyncio.sleep(
                    min(self.max_wait_s, exc.retry_after or self.wait_s * 2 ** (attempt - 1))
                )
        raise AssertionError("unreachable")

    async def find(
        self, name: str, since: datetime, count: int, exclude: frozenset[str] = frozenset()
    ) -> list[str]:
        raise NotImplementedError

    async def lines(self, url: str) -> AsyncIterator[bytes]:
        """The lines of a JSONL answer as they arrive. Opening it is retried; a failure after
        the first line is not (it would repeat lines): it propagates, and reading the items
        again later is safe."""
        stack, resp = await self.retrying(lambda: self._open(url))
        async with stack:
            tail = b""
            async for chunk in decoded(resp):
                parts = (tail + chunk).split(b"\n")
                tail = parts.pop()
                if len(tail) > MAX_ANSWER_BYTES:  # one result line: no answer is that long
                    raise Fatal(
                        f"a line of the batch results at {origin(url)} is over "
                        f"{MAX_ANSWER_BYTES >> 20} MB: not a batch result\n  fix: check base_url"
                    )
                for line in parts:
                    if line.strip():
                        yield line
            if tail.strip():
                yield tail

    async def _open(self, url: str) -> tuple[contextlib.AsyncExitStack, aiohttp.ClientResponse]:
        stack = contextlib.AsyncExitStack()
        try:
            resp = await stack.enter_async_context(self.provider.stream("GET", url))
            if resp.status != 200:
                raise self.provider.error(resp.status, resp.headers, await self.provider.read(resp))
        except BaseException:
            await stack.aclose()
            raise
        return stack, resp

    async def joined(self, path: Path, head: bytes, tail: bytes) -> AsyncIterator[bytes]:
        """The file's lines as one JSON array between `head` and `tail`, read in chunks (a
        256 MB batch body is never in memory)."""
        out, first = bytearray(head), True
        with open(path, "rb") as f:
            for line in f:
                line = line.rstrip(b"\r\n")
                if not line:
                    continue
                if not first:
                    out += b","
                out += line
                first = False
                if len(out) >= self.chunk_bytes:
                    yield bytes(out)
                    out.clear()
        out += tail
        yield bytes(out)

    async def aclose(self) -> None:
        await self.provider.aclose()

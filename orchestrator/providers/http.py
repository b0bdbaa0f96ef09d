"""What every HTTP provider shares: the session, the call, and the classification of failures.

Subclasses speak one wire protocol: they build the URL, headers and body, read a completion out
of a 200 answer, and read the server's rate-limit headers. API keys live only in the session's
headers and are scrubbed from every message this module raises and from every answer's text
(answer()), in any form a server may echo them in (safety.secret_pattern).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urljoin

import aiohttp
import orjson
from multidict import CIMultiDictProxy

from orchestrator.plan import Cell, Task
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import (
    Fatal,
    RateInfo,
    RateLimited,
    Refused,
    TooLong,
    Transient,
    Unreachable,
)
from orchestrator.providers.replies import _number, seconds_until
from orchestrator.providers.safety import decoded, origin, same_origin, secret_pattern
from orchestrator.spec.campaign import DEFAULT_URLS, ModelConfig

_SCAN = 1 << 16  # what is read of an error body: enough for any message, bounded for any page
# The most of an answer that is read, counted after decompression: far above any answer a
# max_tokens allows, far below what a gzip bomb would expand to.
MAX_ANSWER_BYTES = 32 << 20
MAX_BATCH_JSON_BYTES = 4 << 30  # a batch's own JSON: 100,000 answers inline, still bounded
_DETAIL = 300  # what of it a message quotes

# How servers say that one request's prompt is too long for the model (OpenAI and compatible
# servers such as vLLM and llama.cpp, Anthropic, Gemini): that request can never succeed, the
# next one may. Any other 400 is about the model's settings or the key, and stops the model.
_TOO_LONG = re.compile(
    r"context_length_exceeded|maximum context length|available context size"
    r"|exceed_context_size|prompt is too long|exceed context limit"
    r"|input token count.{0,40}exceeds",
    re.I,
)
# How they say that a safety filter blocked the prompt: a refusal, as Gemini's blocked prompt is.
_FILTERED = re.compile(r'"code"\s*:\s*"(?:content_filter|invalid_prompt)"')
_BAD_KEY = re.compile(r"API_KEY_INVALID|API key not valid")  # Gemini says so with a 400


def merged(body: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The body with a model's extra_body in it: tables merge key by key, anything else
    replaces what the tool wrote."""
    out = dict(body)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def api_key(model: ModelConfig) -> str | None:
    """The key, from the environment only (check_credentials made sure it is set)."""
    return os.environ.get(model.api_key_env) if model.api_key_env else None


class HTTPProvider:
    overload_statuses: tuple[int, ...] = (503,)

    def __init__(
        self,
        model: ModelConfig,
        max_connections: int = 64,
        timeout_s: float = 120.0,
        base_url: str | None = None,
        key: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = (base_url or model.base_url or DEFAULT_URLS.get(model.provider, "")).rstrip(
            "/"
        )
        self._key = key if key is not None else api_key(model)  # a replica's: its run's own
        # Headers from the environment (headers_env): sent, never recorded, scrubbed like keys.
        self._env_headers = {
            h: os.environ.get(env, "") for h, env in (model.headers_env or {}).items()
        }
        self._mask = secret_pattern([self._key, *self._env_headers.values()])
        self._max_connections, self._timeout_s = max_connections, timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._bodies: dict[Any, bytes] = {}

    # --- what a protocol defines -------------------------------------------------------------
    def url(self, task: Task) -> str:
        raise NotImplementedError

    def headers(self, key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def request(self, cell: Cell) -> dict[str, Any]:
        """The request body every sample of a cell shares (all but the seed)."""
        raise NotImplementedError

    def with_seed(self, body: bytes, seed: int) -> bytes:
        """The body with a sample's seed in it; by default the protocol takes no seed."""
        return body

    def completion(self, payload: bytes, headers: CIMultiDictProxy) -> Completion:
        raise NotImplementedError

    def rate(self, headers: CIMultiDictProxy) -> RateInfo | None:
        return None

    def retry_hint(self, headers: CIMultiDictProxy, payload: bytes) -> float | None:
        ms = _number(headers.get("retry-after-ms"))
        return ms / 1000 if ms is not None else seconds_until(headers.get("Retry-After"))

    def quota_exhausted(self, text: str) -> bool:
        """Whether an error body says the key's quota or credit is used up: not back for hours,
        whatever retry hint came with it."""
        return False

    # --- shared ------------------------------------------------------------------------------
    def scrub(self, text: str) -> str:
        return self._mask.sub("***", text) if self._mask is not None else text

    def answer(self, payload: bytes, headers: CIMultiDictProxy) -> Completion:
        """A 200 answer read as its completion (the protocol's completion()), with the key
        masked in its text, reasoning and names, as in messages: a server or model that echoes the
        request's headers must not put the key into the records. Every answer, online or from
        a batch, is read through here."""
        done = self.completion(payload, headers)
        mask = self._mask
        if mask is None:
            return done
        texts: dict[str, Any] = {  # every string of the answer that is kept in the record
            name: self.scrub(value)
            for name in ("text", "reasoning", "served_model", "system_fingerprint", "finish_reason")
            if isinstance(value := getattr(done, name), str) and mask.search(value)
        }
        return dataclasses.replace(done, **texts) if texts else done

    def session_headers(self) -> dict[str, str]:
        """Every call's headers: the protocol's, the key (in api_key_header when the model
        names one, as Azure's `api-key`), and headers_env's."""
        own = self.model.api_key_header
        headers = self.headers(None if own else self._key)
        if own and self._key:
            headers[own] = self._key
        return {
            "Content-Type": "application/json",
            "Accept-Encoding": "gzip, deflate",  # what decoded() reads
            **headers,
            **self._env_headers,
        }

    def body(self, task: Task) -> bytes:
        # Built once per cell: on a fast endpoint, encoding a body per call is a cost that shows.
        cached = self._bodies.get(task.cell)
        if cached is None:
            request = self.request(task.cell)
            if self.model.extra_body:
                request = merged(request, self.model.extra_body)
            cached = orjson.dumps(request)
            if task.cell.cacheable:
                self._bodies[task.cell] = cached
        seed = self.seed_for(task)
        return cached if seed is None else self.with_seed(cached, seed)

    def seed_for(self, task: Task) -> int | None:
        """Each sample its own seed, derived from the task id: samples differ from each other,
        yet each one is reproducible."""
        if self.model.seed is None:
            return None
        return (self.model.seed + int(task.task_id[:8], 16)) % 2**31

    async def start(self) -> None:
        return None

    async def complete(self, task: Task) -> Completion:
        status, headers, payload = await self.post(self.url(task), self.body(task))
        if status == 200:
            return self.answer(payload, headers)
        raise self.error(status, headers, payload)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                headers=self.session_headers(),
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                # decompressed here, a bounded piece at a time (decoded): aiohttp's own
                # inflates a whole network read at once, 64 MB from 64 KB of a gzip bomb
                auto_decompress=False,
            )
        return self._session

    async def post(self, url: str, body: bytes) -> tuple[int, CIMultiDictProxy, bytes]:
        """One request: the answer's status, headers and body, or a classified error."""
        session = self._session or self._client()
        try:
            # No redirect is followed: a key in x-api-key or x-goog-api-key would go along to
            # whatever host the answer names (aiohttp drops only Authorization).
            async with session.post(url, data=body, allow_redirects=False) as resp:
                return resp.status, resp.headers, await self.read(resp)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise self.failure(exc) from None

    async def read(self, resp: aiohttp.ClientResponse, limit: int = MAX_ANSWER_BYTES) -> bytes:
        """The body, decompressed, of at most `limit` bytes (an error body: of _SCAN, which is
        all a message quotes); a longer answer is refused as the broken server's it is."""
        if resp.status >= 300:
            limit = min(limit, _SCAN)
        length = resp.content_length
        if length is not None and length <= limit and not resp.headers.get("Content-Encoding"):
            return await resp.read()  # the common answer: its size stated, not compressed
        out = bytearray()
        async for chunk in decoded(resp):
            out += chunk
            if len(out) > limit:
                if resp.status >= 300:  # enough to say what went wrong
                    return bytes(out[:limit])
                raise Fatal(
                    f"the answer from {self.base_url} is over {limit >> 20} MB (decompressed): "
                    "no model answer is that long\n  fix: check base_url points at the model's "
                    "API, not at a proxy or a page"
                )
        return bytes(out)

    async def send(
        self, method: str, url: str, data: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, CIMultiDictProxy, bytes]:
        """Any request (a GET, an upload) on the same session, its failures classified as
        post()'s are."""
        async with self.stream(method, url, data, headers) as resp:
            # a batch's JSON (Gemini's holds every answer inline) is far larger than one answer
            return resp.status, resp.headers, await self.read(resp, MAX_BATCH_JSON_BYTES)

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, url: str, data: Any = None, headers: dict[str, str] | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A request whose body is sent and read inside the block, in pieces if need be (a
        batch's input file, its results): no limit on the whole, only on each wait for the
        server. A failure inside the block is classified as post()'s are."""
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._timeout_s, sock_read=self._timeout_s
        )
        try:
            url = urljoin(self.base_url + "/", url)  # "//host/path" is another host's
            if not same_origin(url, self.base_url):  # a batch's results_url, say
                raise Fatal(
                    f"refused to send this model's key to {origin(url)}, another origin than "
                    f"base_url {origin(self.base_url)}\n  fix: check base_url"
                )
            async with self._client().request(
                method, url, data=data, headers=headers, timeout=timeout, allow_redirects=False
            ) as resp:
                yield resp
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise self.failure(exc) from None

    def failure(self, exc: BaseException) -> Exception:
        """What a failed exchange means: worth another try, no server there, or no hope."""
        if isinstance(exc, asyncio.TimeoutError):
            return Transient(f"no answer within {self._timeout_s:g} s")
        if isinstance(exc, aiohttp.ClientConnectorError):  # no such host, connection refused
            return Unreachable(
                self.scrub(
                    f"cannot connect to {self.base_url} ({type(exc).__name__}: {exc})\n  fix: check "
                    "base_url and that the server is up, then run again to resume"
                )
            )
        if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)):
            return Transient(self.scrub(f"{type(exc).__name__}: {exc}"))
        # e.g. an unusable URL: no retry can help
        return Fatal(
            self.scrub(f"{type(exc).__name__}: {exc}\n  fix: check base_url {self.base_url}")
        )

    def error(self, status: int, headers: CIMultiDictProxy, payload: bytes) -> Exception:
        if 300 <= status < 400:
            return Fatal(
                f"{status} from {self.model.label}: a redirect to "
                f"{origin(headers.get('Location', '') or '(nowhere)')}, which API calls do not "
                "follow (the key would go along)\n  fix: set base_url to the address the "
                "server redirects to, if you trust it"
            )
        label, key_env = self.model.label, self.model.api_key_env or "api_key_env"
        # Scrubbed before it is cut: a key cut in two at the edge would escape the scrub.
        text = self.scrub(payload[:_SCAN].decode("utf-8", "replace"))
        said = f"{status} from {label}: {text[:_DETAIL]}"
        if status >= 400 and self.quota_exhausted(text):
            return Fatal(
                f"{said}\n  fix: the quota of the key in {key_env} is used up: add "
                "credit or raise the quota, then run again to resume"
            )
        if status == 429 or status in self.overload_statuses:
            return RateLimited(said, self.retry_hint(headers, payload), self.rate(headers))
        if status in (408, 409) or status >= 500:
            return Transient(said, self.retry_hint(headers, payload), self.rate(headers))
        if status == 413 or (status == 400 and _TOO_LONG.search(text)):
            return TooLong(said)
        if status == 400 and _FILTERED.search(text):
            return Refused(f"refused, prompt filtered: {said}")
        fixes = {
            401: f"the API key was rejected: check {key_env}",
            403: f"the key may not use '{self.model.name}': check its permissions",
            404: f"check the model name '{self.model.name}' and base_url {self.base_url}",
        }
        fix = (
            fixes[401]
            if status == 400 and _BAD_KEY.search(text)
            else fixes.get(
                status,
                "check the model's settings (max_tokens, temperature, structured_output) "
                "against what the provider accepts",
            )
        )
        return Fatal(f"{said}\n  fix: {fix}")

    def malformed(self, payload: bytes) -> Transient:
        text = self.scrub(payload[:_SCAN].decode("utf-8", "replace"))
        return Transient(f"malformed response body: {text[:200]!r}")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

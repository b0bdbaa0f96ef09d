"""Any OpenAI-compatible chat-completions endpoint, over aiohttp."""
from __future__ import annotations

import asyncio
import email.utils
import os
import time
from typing import Any

import aiohttp
import orjson

from orchestrator.plan import Task
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import Fatal, RateLimited, Refused, Transient
from orchestrator.providers.structured import response_format
from orchestrator.spec.campaign import ModelConfig


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def api_key(model: ModelConfig) -> str | None:
    """The key, from the environment only (check_credentials has made sure it is set)."""
    return os.environ.get(model.api_key_env) if model.api_key_env else None


class OpenAIProvider:
    def __init__(self, model: ModelConfig, max_connections: int = 64, timeout_s: float = 120.0,
                 base_url: str | None = None, structured_form: str | None = None) -> None:
        self.model = model
        self.url = (base_url or model.base_url).rstrip("/") + "/chat/completions"
        self._form = structured_form or model.structured_output_form
        self._headers = {"Content-Type": "application/json"}
        if (key := api_key(model)) is not None:
            self._headers["Authorization"] = f"Bearer {key}"
        self._max_connections, self._timeout_s = max_connections, timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._bodies: dict[Any, bytes] = {}

    def _body(self, task: Task) -> bytes:
        """The request body. All but the seed is the same for every sample of a cell, so it is
        built once per cell; with a seed, each sample gets its own, derived from the task id,
        so samples differ from each other yet each one is reproducible."""
        m = self.model
        cached = self._bodies.get(task.cell)
        if cached is None:
            body: dict[str, Any] = {"model": m.name, "messages": list(task.cell.messages),
                                    "max_tokens": m.max_tokens}
            for key, value in (("temperature", m.temperature), ("top_p", m.top_p)):
                if value is not None:
                    body[key] = value
            if m.structured_output:
                body["response_format"] = response_format(task.cell.contract, self._form)
            cached = self._bodies[task.cell] = orjson.dumps(body)
        if m.seed is None:
            return cached
        seed = (m.seed + int(task.task_id[:8], 16)) % 2**31
        return cached[:-1] + b',"seed":' + str(seed).encode() + b"}"

    async def complete(self, task: Task) -> Completion:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._max_connections)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers,
                                                  timeout=aiohttp.ClientTimeout(total=self._timeout_s))
        try:
            async with self._session.post(self.url, data=self._body(task)) as resp:
                payload = await resp.read()
                status, headers = resp.status, resp.headers
        except asyncio.TimeoutError:
            raise Transient(f"no answer within {self._timeout_s:g} s") from None
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from None
        if status == 200:
            return self._completion(payload)
        detail = payload[:300].decode("utf-8", "replace")
        if status == 429:
            raise RateLimited(f"429 from {self.model.label}: {detail}",
                              retry_after_seconds(headers.get("Retry-After")))
        if status in (408, 409) or status >= 500:
            raise Transient(f"{status} from {self.model.label}: {detail}",
                            retry_after_seconds(headers.get("Retry-After")))
        raise Fatal(f"{status} from {self.model.label}: {detail}")

    def _completion(self, payload: bytes) -> Completion:
        try:
            data = orjson.loads(payload)
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
            raise Transient(f"malformed response body: {payload[:200]!r}") from None
        finish = choice.get("finish_reason")
        if finish == "content_filter":
            raise Refused(f"content filter: {text[:200]}")
        usage = data.get("usage") or None
        return Completion(text=text, usage=usage and {k: usage.get(k) for k in
                                                      ("prompt_tokens", "completion_tokens")},
                          served_model=data.get("model"), finish_reason=finish)

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

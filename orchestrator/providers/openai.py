"""OpenAI chat completions, also the protocol of OpenAI-compatible servers (vLLM, Groq, ...)."""

from __future__ import annotations

from typing import Any

import orjson
from multidict import CIMultiDictProxy

from orchestrator.plan import Cell, Task
from orchestrator.providers import logprobs
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import RateInfo, Refused
from orchestrator.providers.http import HTTPProvider, rate_info, usage
from orchestrator.providers.structured import response_format
from orchestrator.spec.campaign import ModelConfig


class OpenAIProvider(HTTPProvider):
    def __init__(
        self,
        model: ModelConfig,
        max_connections: int = 64,
        timeout_s: float = 120.0,
        base_url: str | None = None,
        structured_form: str | None = None,
    ) -> None:
        super().__init__(model, max_connections, timeout_s, base_url)
        self._url = self.base_url + "/chat/completions"
        self._form = structured_form or model.structured_output_form
        self.score_prefix = ""  # sent before a scored text, outside its offsets (local.py)

    def url(self, task: Task) -> str:
        return self._url

    def headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def request(self, cell: Cell) -> dict[str, Any]:
        m = self.model
        body: dict[str, Any] = {
            "model": m.name,
            "messages": list(cell.messages),
            "max_tokens": m.max_tokens,
        }
        for key, value in (("temperature", m.temperature), ("top_p", m.top_p)):
            if value is not None:
                body[key] = value
        if m.structured_output:
            body["response_format"] = response_format(cell.contract, self._form)
        return body

    async def score(self, task: Task, text: str, continuation: str) -> Completion:
        body = logprobs.request(self.model.name, self.score_prefix, text, continuation)
        status, headers, payload = await self.post(self.base_url + "/completions", body)
        if status != 200:
            raise self.error(status, headers, payload)
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise self.malformed(payload) from None
        if not isinstance(data, dict):
            raise self.malformed(payload)
        return Completion(
            text=continuation,
            served_model=data.get("model"),
            system_fingerprint=data.get("system_fingerprint"),
            usage=usage(data.get("usage"), "prompt_tokens", "completion_tokens"),
            rate=self.rate(headers),
            logprob=logprobs.continuation_logprob(data, text, continuation),
        )

    def with_seed(self, body: bytes, seed: int) -> bytes:
        return body[:-1] + b',"seed":' + str(seed).encode() + b"}"

    def rate(self, headers: CIMultiDictProxy) -> RateInfo | None:
        return rate_info(headers, "x-ratelimit-")

    def quota_exhausted(self, text: str) -> bool:
        # OpenAI's 429 for an account out of credit; its retry-after, if any, is not to be believed.
        return '"insufficient_quota"' in text

    def completion(self, payload: bytes, headers: CIMultiDictProxy) -> Completion:
        try:
            data = orjson.loads(payload)
            choice = data["choices"][0]
            message = choice["message"]
            text = message.get("content") or ""
            if not isinstance(text, str):
                raise TypeError("content is not text")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
            raise self.malformed(payload) from None
        finish = choice.get("finish_reason")
        if finish == "content_filter" or message.get("refusal"):
            raise Refused(f"refused ({finish}): {message.get('refusal') or text[:200]}")
        return Completion(
            text=text,
            served_model=data.get("model"),
            finish_reason=finish,
            system_fingerprint=data.get("system_fingerprint"),
            usage=usage(data.get("usage"), "prompt_tokens", "completion_tokens"),
            rate=self.rate(headers),
        )

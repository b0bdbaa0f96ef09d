"""Anthropic Messages API: x-api-key, anthropic-version, top-level system, content blocks."""

from __future__ import annotations

from typing import Any

import orjson
from multidict import CIMultiDictProxy

from orchestrator.plan import Cell, Task
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import RateInfo, Refused
from orchestrator.providers.http import HTTPProvider, rate_info, usage

API_VERSION = "2023-06-01"


class AnthropicProvider(HTTPProvider):
    overload_statuses = (503, 529)

    def url(self, task: Task) -> str:
        return self.base_url + "/v1/messages"

    def headers(self, key: str | None) -> dict[str, str]:
        return {"anthropic-version": API_VERSION, **({"x-api-key": key} if key else {})}

    def request(self, cell: Cell) -> dict[str, Any]:  # the Messages API takes no seed
        m = self.model
        system = [msg["content"] for msg in cell.messages if msg["role"] == "system"]
        body: dict[str, Any] = {
            "model": m.name,
            "max_tokens": m.max_tokens,
            "messages": [
                {"role": msg["role"], "content": msg["content"]}
                for msg in cell.messages
                if msg["role"] != "system"
            ],
        }
        if system:
            body["system"] = "\n\n".join(system)
        for key, value in (("temperature", m.temperature), ("top_p", m.top_p)):
            if value is not None:
                body[key] = value
        return body

    def rate(self, headers: CIMultiDictProxy) -> RateInfo | None:
        return rate_info(headers, "anthropic-ratelimit-")

    def quota_exhausted(self, text: str) -> bool:
        return "credit balance is too low" in text  # a 400 invalid_request_error

    def completion(self, payload: bytes, headers: CIMultiDictProxy) -> Completion:
        try:
            data = orjson.loads(payload)
            text = "".join(
                block.get("text", "") for block in data["content"] if block.get("type") == "text"
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise self.malformed(payload) from None
        stop = data.get("stop_reason")
        if stop == "refusal":
            raise Refused(f"refused: {text[:200]}")
        return Completion(
            text=text,
            served_model=data.get("model"),
            finish_reason=stop,
            usage=usage(data.get("usage"), "input_tokens", "output_tokens"),
            rate=self.rate(headers),
        )

"""Anthropic Messages API: x-api-key, anthropic-version, top-level system, content blocks."""

from __future__ import annotations

from typing import Any

import orjson
from multidict import CIMultiDictProxy

from orchestrator.plan import Cell, Task
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import RateInfo, Refused
from orchestrator.providers.http import HTTPProvider
from orchestrator.providers.replies import rate_info, usage
from orchestrator.providers.structured import json_schema

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
        if m.thinking_budget:  # extended thinking: within max_tokens (checked at load)
            body["thinking"] = {"type": "enabled", "budget_tokens": m.thinking_budget}
        if m.structured_output:  # JSON outputs, generally available since January 2026
            body["output_config"] = {
                "format": {"type": "json_schema", "schema": anthropic_schema(cell.contract)}
            }
        return body

    def rate(self, headers: CIMultiDictProxy) -> RateInfo | None:
        return rate_info(headers, "anthropic-ratelimit-")

    def quota_exhausted(self, text: str) -> bool:
        return "credit balance is too low" in text  # a 400 invalid_request_error

    def completion(self, payload: bytes, headers: CIMultiDictProxy) -> Completion:
        try:
            data = orjson.loads(payload)
            blocks = data["content"]
            # The answer is the text blocks alone; thinking blocks come first and are kept apart
            # (a redacted_thinking block is encrypted: nothing of it can be read).
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            thinking = [b.get("thinking", "") for b in blocks if b.get("type") == "thinking"]
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise self.malformed(payload) from None
        stop = data.get("stop_reason")
        if stop == "refusal":
            raise Refused(f"refused: {self.scrub(text)[:200]}")  # scrubbed, then cut
        return Completion(
            text=text,
            served_model=data.get("model"),
            finish_reason=stop,
            usage=_usage(data.get("usage")),
            rate=self.rate(headers),
            reasoning="\n\n".join(t for t in thinking if isinstance(t, str) and t) or None,
        )


def _usage(report: object) -> dict[str, int | None] | None:
    """Thinking tokens are billed inside output_tokens; newer answers also count them apart
    (`output_tokens_details.thinking_tokens`), older ones nowhere."""
    counted = usage(report if isinstance(report, dict) else None, "input_tokens", "output_tokens")
    details = report.get("output_tokens_details") if isinstance(report, dict) else None
    if counted is not None and isinstance(details, dict):
        thinking = details.get("thinking_tokens")
        if isinstance(thinking, int) and not isinstance(thinking, bool) and thinking >= 0:
            counted["reasoning_tokens"] = thinking
    return counted


def anthropic_schema(contract) -> dict[str, Any]:
    """The task's JSON schema as JSON outputs take it: without string length limits, which
    they do not support (the judge's reason is bounded by the prompt's words instead)."""
    schema = json_schema(contract)
    props = {
        name: {k: v for k, v in spec.items() if k not in ("maxLength", "minLength")}
        for name, spec in schema["properties"].items()
    }
    return {**schema, "properties": props}

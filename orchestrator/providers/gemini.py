"""Google Gemini generateContent: contents/parts, systemInstruction, generationConfig."""

from __future__ import annotations

import re
from typing import Any

import orjson
from multidict import CIMultiDictProxy

from orchestrator.plan import Cell, Task
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import Refused
from orchestrator.providers.http import HTTPProvider
from orchestrator.providers.replies import seconds_until, usage
from orchestrator.spec.models import ResponseContract

BLOCKED = {"SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY"}
# A 429 whose QuotaFailure names a daily quota: its retryDelay (seconds) is not to be believed.
_DAILY_QUOTA = re.compile(r'"quotaId"\s*:\s*"[^"]*PerDay')


def response_schema(contract: ResponseContract) -> dict[str, Any]:
    """Gemini's schema dialect (an OpenAPI subset): enums are for strings only."""
    if contract.kind == "judgment":
        return {
            "type": "OBJECT",
            "properties": {
                "score": {"type": "INTEGER"},
                "verdict": {"type": "STRING", "enum": list(contract.options)},
                "reason": {"type": "STRING"},
            },
            "required": ["score", "verdict", "reason"],
        }
    if contract.kind == "choice":
        field = {"type": "STRING", "enum": list(contract.options)}
    else:
        field = {"type": "INTEGER" if contract.kind == "rating" else "NUMBER"}
    return {"type": "OBJECT", "properties": {contract.field: field}, "required": [contract.field]}


class GeminiProvider(HTTPProvider):
    def url(self, task: Task) -> str:
        return f"{self.base_url}/v1beta/models/{self.model.name}:generateContent"

    def headers(self, key: str | None) -> dict[str, str]:
        # The key goes in a header, never in the URL, where logs and error messages would show it.
        return {"x-goog-api-key": key} if key else {}

    def request(self, cell: Cell) -> dict[str, Any]:
        m = self.model
        system = [msg["content"] for msg in cell.messages if msg["role"] == "system"]
        config: dict[str, Any] = {"maxOutputTokens": m.max_tokens}
        for key, value in (("temperature", m.temperature), ("topP", m.top_p)):
            if value is not None:
                config[key] = value
        if m.structured_output:
            config["responseMimeType"] = "application/json"
            config["responseSchema"] = response_schema(cell.contract)
        if m.thinking_budget is not None:  # the thought summary comes back, apart (completion)
            thinking: dict[str, Any] = {"thinkingBudget": m.thinking_budget}
            if m.thinking_budget:
                thinking["includeThoughts"] = True
            config["thinkingConfig"] = thinking
        body: dict[str, Any] = {
            "contents": [
                {"role": "user", "parts": [{"text": msg["content"]}]}
                for msg in cell.messages
                if msg["role"] != "system"
            ],
            "generationConfig": config,
        }
        if system:
            body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
        return body

    def with_seed(self, body: bytes, seed: int) -> bytes:
        request = orjson.loads(body)
        request["generationConfig"]["seed"] = seed
        return orjson.dumps(request)

    def retry_hint(self, headers: CIMultiDictProxy, payload: bytes) -> float | None:
        """429 RESOURCE_EXHAUSTED carries a RetryInfo detail with retryDelay ("17s")."""
        try:
            for detail in orjson.loads(payload)["error"].get("details", []):
                if detail.get("@type", "").endswith("RetryInfo"):
                    return seconds_until(detail.get("retryDelay"))
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            pass
        return super().retry_hint(headers, payload)

    def quota_exhausted(self, text: str) -> bool:
        return bool(_DAILY_QUOTA.search(text))

    def completion(self, payload: bytes, headers: CIMultiDictProxy) -> Completion:
        try:
            data = orjson.loads(payload)
            blocked = (data.get("promptFeedback") or {}).get("blockReason")
            if blocked:
                raise Refused(f"prompt blocked: {blocked}")
            candidate = data["candidates"][0]
            finish = candidate.get("finishReason")
            if finish in BLOCKED:
                raise Refused(f"answer blocked: {finish}")
            # A finished candidate may hold no parts (MAX_TOKENS when thinking used up
            # maxOutputTokens): an empty answer, final and billed once, not a body to retry.
            parts = (candidate.get("content") or {}).get("parts") or []
            if not parts and not finish:  # neither an answer nor the end of one: garbled
                raise self.malformed(payload)
            # Thought summaries (includeThoughts) are parts marked `thought`: kept apart.
            text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
            thoughts = "".join(p.get("text", "") for p in parts if p.get("thought"))
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
            raise self.malformed(payload) from None
        return Completion(
            text=text,
            served_model=data.get("modelVersion"),
            finish_reason=finish,
            usage=usage(
                data.get("usageMetadata"),
                "promptTokenCount",
                "candidatesTokenCount",
                "thoughtsTokenCount",
            ),
            reasoning=thoughts or None,
        )

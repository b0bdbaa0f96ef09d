"""OpenAI chat completions, also the protocol of OpenAI-compatible servers (vLLM, Groq, ...)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
from multidict import CIMultiDictProxy

from orchestrator.plan import Cell, Task
from orchestrator.providers import logprobs
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import Fatal, RateInfo, Refused
from orchestrator.providers.http import HTTPProvider
from orchestrator.providers.replies import rate_info, usage
from orchestrator.providers.structured import response_format
from orchestrator.spec.campaign import ModelConfig
from orchestrator.spec.reasoning import openai_reasoning


def refuses_max_tokens(payload: bytes) -> bool:
    """Whether a 400 says the model takes max_completion_tokens instead of max_tokens (OpenAI's
    `unsupported_parameter` on `max_tokens`, or a gateway's words for it)."""
    try:
        error = orjson.loads(payload).get("error") or {}
        said = (error.get("param"), error.get("code"), str(error.get("message", "")))
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return (said[0], said[1]) == ("max_tokens", "unsupported_parameter") or (
        "max_tokens" in said[2] and "max_completion_tokens" in said[2]
    )


_TEMPERATURE_REFUSED = re.compile(rb'"param"\s*:\s*"(?:temperature|top_p)"')


def reasoning_text(message: dict[str, Any]) -> str | None:
    """What an OpenAI-compatible server shows of the model's reasoning: `reasoning_content`
    (DeepSeek, vLLM's reasoning parsers, llama.cpp) or `reasoning` (OpenRouter, newer vLLM)."""
    for field in ("reasoning_content", "reasoning"):
        text = message.get(field)
        if isinstance(text, str) and text.strip():
            return text
    return None


class OpenAIProvider(HTTPProvider):
    def __init__(
        self,
        model: ModelConfig,
        max_connections: int = 64,
        timeout_s: float = 120.0,
        base_url: str | None = None,
        structured_form: str | None = None,
        say: Callable[[str], None] | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(model, max_connections, timeout_s, base_url, key)
        self._url = self.base_url + "/chat/completions"
        self._form = structured_form or model.structured_output_form
        self.score_prefix = ""  # sent before a scored text, outside its offsets (local.py)
        self._reasoning = openai_reasoning(model)
        # A reasoning model takes max_completion_tokens; one not known by name is switched when
        # the server refuses max_tokens (once, said, and noted in its records).
        self.token_param = "max_completion_tokens" if self._reasoning else "max_tokens"
        self._say = say

    def url(self, task: Task) -> str:
        return self._url

    def headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def request(self, cell: Cell) -> dict[str, Any]:
        m = self.model
        body: dict[str, Any] = {
            "model": m.name,
            "messages": list(cell.messages),
            self.token_param: m.max_tokens,
        }
        for key, value in (("temperature", m.temperature), ("top_p", m.top_p)):
            # A reasoning model samples at 1 (load refuses another value), and some refuse
            # the parameter even at 1 (o3-mini): it is left out.
            if value is not None and not (self._reasoning and value == 1):
                body[key] = value
        if m.reasoning_effort is not None:
            body["reasoning_effort"] = m.reasoning_effort
        if m.structured_output:
            body["response_format"] = response_format(cell.contract, self._form)
        return body

    async def complete(self, task: Task) -> Completion:
        sent = self.token_param
        status, headers, payload = await self.post(self._url, self.body(task))
        if status == 400 and sent == "max_tokens" and refuses_max_tokens(payload):
            self._switch_to_max_completion_tokens()
            status, headers, payload = await self.post(self._url, self.body(task))
        if status == 200:
            return self.answer(payload, headers)
        raise self.error(status, headers, payload)

    def _switch_to_max_completion_tokens(self) -> None:
        """The server is a reasoning model's: from now on every request of this model says
        max_completion_tokens (the same number), and the request bodies are built anew."""
        if self.token_param == "max_completion_tokens":
            return  # another task's answer switched it already
        self.token_param = "max_completion_tokens"
        self._bodies.clear()
        if self._say is not None:
            self._say(
                f"{self.model.label}: the server refused max_tokens (unsupported_parameter), so "
                "it is sent as max_completion_tokens from now on (recorded as model."
                "maxTokensParam); set reasoning = true on the model to send it so at once"
            )

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

    def error(self, status: int, headers: CIMultiDictProxy, payload: bytes) -> Exception:
        exc = super().error(status, headers, payload)
        if status == 400 and refuses_max_tokens(payload):  # in a batch, where no switch is
            return Fatal(
                f"{exc}\n  (a reasoning model: set reasoning = true on the model, so that "
                "max_tokens is sent as max_completion_tokens)"
            )
        if status == 400 and _TEMPERATURE_REFUSED.search(payload[:4096]):
            return Fatal(
                f"{exc}\n  (a reasoning model takes no temperature but 1: set reasoning = true "
                "on the model and remove temperature; the design changes, so the tool does not "
                "drop it for you)"
            )
        return exc

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
            refusal = message.get("refusal")  # scrubbed before it is cut, as error bodies are
            said = self.scrub(str(refusal)) if refusal else self.scrub(text)[:200]
            raise Refused(f"refused ({finish}): {said}")
        return Completion(
            text=text,
            served_model=data.get("model"),
            finish_reason=finish,
            system_fingerprint=data.get("system_fingerprint"),
            usage=usage(data.get("usage"), "prompt_tokens", "completion_tokens"),
            rate=self.rate(headers),
            reasoning=reasoning_text(message),
            max_tokens_param=None if self.token_param == "max_tokens" else self.token_param,
        )

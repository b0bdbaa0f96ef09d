"""The three wire formats the emulator speaks: how a call is read and how answers are written."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web


@dataclass
class Call:
    credential: str
    model: str
    prompt: str  # every text sent, for token counting
    max_tokens: int
    schema: dict[str, Any] | None
    user_prompt: str = ""
    echo: bool = False  # a completions call asking for the prompt's log-probabilities
    logprobs: dict[str, Any] | None = None  # what the server computed for it (answers.py)
    betas: str = ""  # Anthropic: the anthropic-beta header (a batch item: its batch's)


def bearer(request: web.Request) -> str:
    """The OpenAI protocol's key: `Authorization: Bearer`, or Azure OpenAI's `api-key` header."""
    said = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    return said or request.headers.get("api-key", "").strip()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if isinstance(block, dict))


class OpenAI:
    name, route, overload_status = "openai", "/v1/chat/completions", 503

    def parse(self, request: web.Request, body: dict[str, Any]) -> Call:
        return self.read(body, bearer(request))

    def read(self, body: dict[str, Any], credential: str, model: str | None = None) -> Call:
        """A call from its body alone (a batch item has no request of its own)."""
        texts = [_text(m.get("content")) for m in body["messages"]]
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        return Call(credential, body["model"], "".join(texts), max_tokens, schema, texts[-1])

    def success(
        self,
        call: Call,
        text: str,
        prompt_tokens: int,
        completion_tokens: int,
        refused: bool,
        thoughts: int = 0,
    ) -> dict[str, Any]:
        message = {"role": "assistant", "content": None if refused else text, "refusal": None}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "content_filter" if refused else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def error(
        self, status: int, message: str, retry_after: str | None = None, code: str | None = None
    ) -> dict[str, Any]:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            404: "not_found_error",
            429: "rate_limit_exceeded",
        }.get(status, "server_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": code or kind}}

    def too_long(self, prompt_tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
        body = self.error(
            400,
            f"This model's maximum context length is {limit} tokens. However, "
            f"your messages resulted in {prompt_tokens} tokens. Please reduce "
            "the length of the messages.",
            code="context_length_exceeded",
        )
        body["error"]["param"] = "messages"
        return 400, body

    def quota(self) -> tuple[int, dict[str, Any]]:
        return 429, {
            "error": {
                "message": "You exceeded your current quota, please check your plan "
                "and billing details.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        }


class OpenAICompletions(OpenAI):
    """The legacy completions route, as vLLM and llama.cpp serve it: with `echo` and `logprobs`
    it returns the log-probability of every prompt token (what answers = "score" reads). It
    shares the chat route's limits: one account, one window."""

    route = "/v1/completions"

    def read(self, body: dict[str, Any], credential: str, model: str | None = None) -> Call:
        prompt = body["prompt"]
        if not isinstance(prompt, str):
            raise ValueError("prompt must be a string")
        return Call(
            credential,
            body["model"],
            prompt,
            int(body.get("max_tokens") or 16),
            None,
            prompt,
            echo=bool(body.get("echo")) and body.get("logprobs") is not None,
        )

    def success(
        self,
        call: Call,
        text: str,
        prompt_tokens: int,
        completion_tokens: int,
        refused: bool,
        thoughts: int = 0,
    ) -> dict[str, Any]:
        choice = {
            "text": (call.prompt if call.echo else "") + " ok",
            "index": 0,
            "logprobs": call.logprobs,
            "finish_reason": "length",
        }
        return {
            "id": f"cmpl-{uuid.uuid4().hex[:24]}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": call.model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": 1,
                "total_tokens": prompt_tokens + 1,
            },
        }


class Anthropic:
    name, route, overload_status = "anthropic", "/v1/messages", 529

    def parse(self, request: web.Request, body: dict[str, Any]) -> Call:
        if "anthropic-version" not in request.headers:
            raise ValueError("missing anthropic-version header")
        call = self.read(body, request.headers.get("x-api-key", ""))
        call.betas = request.headers.get("anthropic-beta", "")
        return call

    def read(self, body: dict[str, Any], credential: str, model: str | None = None) -> Call:
        texts = [_text(body.get("system"))] + [_text(m["content"]) for m in body["messages"]]
        # Structured outputs: GA's output_config.format, or the beta's output_format (reasoning.py)
        config = body.get("output_config")
        fmt = body.get("output_format") or (
            config.get("format") if isinstance(config, dict) else None
        )
        schema = fmt.get("schema") if isinstance(fmt, dict) else None
        return Call(
            credential, body["model"], "".join(texts), int(body["max_tokens"]), schema, texts[-1]
        )

    def success(
        self,
        call: Call,
        text: str,
        prompt_tokens: int,
        completion_tokens: int,
        refused: bool,
        thoughts: int = 0,
    ) -> dict[str, Any]:
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": call.model,
            "content": [] if refused else [{"type": "text", "text": text}],
            "stop_reason": "refusal" if refused else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens},
        }

    def error(self, status: int, message: str, retry_after: str | None = None) -> dict[str, Any]:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def too_long(self, prompt_tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
        return 400, self.error(400, f"prompt is too long: {prompt_tokens} tokens > {limit} maximum")

    def quota(self) -> tuple[int, dict[str, Any]]:  # Anthropic says so with a 400
        return 400, self.error(
            400,
            "Your credit balance is too low to access the Anthropic API. "
            "Please go to Plans & Billing to upgrade or purchase credits.",
        )


def google_key(request: web.Request) -> str:
    return request.headers.get("x-goog-api-key") or request.query.get("key", "")


class Gemini:
    name, route, overload_status = "gemini", "/v1beta/models/{action}", 503

    def parse(self, request: web.Request, body: dict[str, Any]) -> Call:
        model, _, verb = request.match_info["action"].partition(":")
        if verb != "generateContent":
            raise ValueError(f"unsupported method {verb}")
        return self.read(body, google_key(request), model)

    def read(self, body: dict[str, Any], credential: str, model: str | None = None) -> Call:
        system = _text((body.get("systemInstruction") or {}).get("parts"))
        texts = [_text(c.get("parts")) for c in body["contents"]]
        config = body.get("generationConfig") or {}
        return Call(
            credential,
            model or "",
            system + "".join(texts),
            int(config.get("maxOutputTokens") or 256),
            config.get("responseSchema"),
            texts[-1],
        )

    def success(
        self,
        call: Call,
        text: str | None,
        prompt_tokens: int,
        completion_tokens: int,
        refused: bool,
        thoughts: int = 0,
    ) -> dict[str, Any]:
        """`thoughts`: tokens spent thinking, within maxOutputTokens; no `text`: they left no room
        for an answer, so the candidate has no parts and finishes MAX_TOKENS."""
        usage = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": completion_tokens,
            "totalTokenCount": prompt_tokens + completion_tokens + thoughts,
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        if refused:  # a blocked answer comes without content
            candidate: dict[str, Any] = {"index": 0, "finishReason": "SAFETY"}
        elif text is None:
            candidate = {"index": 0, "finishReason": "MAX_TOKENS", "content": {"role": "model"}}
            del usage["candidatesTokenCount"]
            usage["totalTokenCount"] = prompt_tokens + thoughts
        else:
            candidate = {
                "index": 0,
                "finishReason": "STOP",
                "content": {"role": "model", "parts": [{"text": text}]},
            }
        return {"candidates": [candidate], "modelVersion": call.model, "usageMetadata": usage}

    def error(self, status: int, message: str, retry_after: str | None = None) -> dict[str, Any]:
        """`retry_after`: the RetryInfo detail's retryDelay, verbatim ("17s")."""
        code = {
            400: "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED",
            503: "UNAVAILABLE",
        }.get(status, "INTERNAL")
        error: dict[str, Any] = {"code": status, "message": message, "status": code}
        if retry_after is not None:
            error["details"] = [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_after}
            ]
        return {"error": error}

    def too_long(self, prompt_tokens: int, limit: int) -> tuple[int, dict[str, Any]]:
        return 400, self.error(
            400,
            f"The input token count ({prompt_tokens}) exceeds the maximum "
            f"number of tokens allowed ({limit}).",
        )

    def quota(self) -> tuple[int, dict[str, Any]]:
        """A daily quota used up: the retryDelay that comes with it is only until the next try."""
        body = self.error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            retry_after="43s",
        )
        body["error"]["details"].insert(
            0,
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                        "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                        "quotaValue": "250",
                    }
                ],
            },
        )
        return 429, body


Protocol = OpenAI | Anthropic | Gemini
PROTOCOLS: tuple[Protocol, ...] = (OpenAI(), OpenAICompletions(), Anthropic(), Gemini())


def echoed(body: dict[str, Any], key: str) -> dict[str, Any]:
    """The error body with the request's key in its message, placed so that a client quoting the
    body's first 300 characters cuts the key in two: a leak test must see a cut key scrubbed."""
    error = body["error"]
    message, marker = error["message"], "KEY-GOES-HERE"
    error["message"] = f"{message} (sent key={marker})"
    at = orjson.dumps(body).decode().index(marker)
    pad = "." * max(0, 300 - len(key) // 2 - at)
    error["message"] = f"{message} {pad}(sent key={key})"
    return body

"""What a server's reply means, whatever it holds: a hint is a finite wait or none, an error body
says whose problem it is (this request's, or the model's), and nothing in headers or body can
raise anything but the few errors the engine understands."""

from __future__ import annotations

import json
import math

import orjson
import pytest

from orchestrator.spec.limits import LimitConfig

# --- hints ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hint",
    [
        "inf",
        "-inf",
        "nan",
        "-5",
        "1e400",
        "9" * 400 + "s",
        "soon",
        "Infinity",
        "   ",
        "17 parsecs",
        "2024-13-45T99:00:00Z",
    ],
)
def test_a_hint_that_is_no_finite_wait_is_no_hint(hint):
    from orchestrator.providers.replies import _int, seconds_until

    assert seconds_until(hint) is None
    assert _int(hint) is None


def test_a_huge_but_finite_hint_is_kept_for_the_engine_to_bound():
    from orchestrator.providers.replies import seconds_until

    assert seconds_until("1e300") == 1e300 and seconds_until("86400") == 86400.0
    assert LimitConfig().max_pause_s == 300


def test_an_unbounded_wait_is_never_a_pause():
    from orchestrator.providers.errors import RateLimited

    for hint in (math.inf, math.nan, -1.0):
        assert RateLimited("x", hint).retry_after is None
    assert RateLimited("x", 2.5).retry_after == 2.5


# --- what each server's error body means ----------------------------------------------------


def provider_for(protocol: str):
    from orchestrator.providers.registry import make_provider
    from orchestrator.spec.campaign import ModelConfig

    model = ModelConfig(
        provider=protocol,
        name=f"{protocol}-test",
        base_url="http://127.0.0.1:9",
        api_key_env=f"HOSTILE_{protocol.upper()}_KEY",
    )
    return make_provider(model, LimitConfig())


def _headers(values: dict[str, str] | None = None):
    from multidict import CIMultiDict, CIMultiDictProxy

    return CIMultiDictProxy(CIMultiDict(values or {}))


_OPENAI_ERROR = {"type": "invalid_request_error", "param": None}
REAL_BODIES = [  # (protocol, status, body, what it is), as the providers and servers send them
    (
        "openai",
        400,
        {
            "error": {
                **_OPENAI_ERROR,
                "code": "context_length_exceeded",
                "param": "messages",
                "message": "This model's maximum context length is 8192 tokens. However, "
                "your messages resulted in 9000 tokens.",
            }
        },
        "TooLong",
    ),
    (
        "openai",
        400,
        {
            "object": "error",
            "type": "BadRequestError",
            "code": 400,  # vLLM
            "message": "This model's maximum context length is 2048 tokens. However, you "
            "requested 2100 tokens (2000 in the messages, 100 in the completion).",
        },
        "TooLong",
    ),
    (
        "openai",
        400,
        {
            "error": {
                "code": 400,
                "type": "exceed_context_size_error",  # llama.cpp server
                "message": "the request exceeds the available context size, try increasing it",
            }
        },
        "TooLong",
    ),
    (
        "openai",
        400,
        {
            "error": {
                **_OPENAI_ERROR,
                "code": "invalid_prompt",
                "message": "Invalid prompt: "
                "your prompt was flagged as potentially violating our usage policy.",
            }
        },
        "Refused",
    ),
    (
        "openai",
        400,
        {
            "error": {
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "message": "The response was filtered due to the prompt triggering "
                "Azure OpenAI's content management policy.",
            }
        },
        "Refused",
    ),
    (
        "openai",
        400,
        {
            "error": {
                **_OPENAI_ERROR,
                "code": "unsupported_value",
                "param": "temperature",
                "message": "Unsupported value: 'temperature' does not support 0.7 with this model.",
            }
        },
        "Fatal",
    ),
    (
        "openai",
        429,
        {
            "error": {
                "message": "You exceeded your current quota.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        },
        "Fatal",
    ),
    (
        "openai",
        429,
        {
            "error": {
                "message": "Rate limit reached for requests",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        "RateLimited",
    ),
    (
        "anthropic",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
        },
        "TooLong",
    ),
    (
        "anthropic",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000",
            },
        },
        "TooLong",
    ),
    (
        "anthropic",
        413,
        {
            "type": "error",
            "error": {
                "type": "request_too_large",
                "message": "Request exceeds the maximum allowed number of bytes.",
            },
        },
        "TooLong",
    ),
    (
        "anthropic",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "max_tokens: 100000 > 64000, which is the maximum allowed number of output "
                "tokens for anthropic-test",
            },
        },
        "Fatal",
    ),
    (
        "anthropic",
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        "RateLimited",
    ),
    (
        "gemini",
        400,
        {
            "error": {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "message": "The input token "
                "count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            }
        },
        "TooLong",
    ),
    (
        "gemini",
        400,
        {
            "error": {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "message": "API key not valid. Please pass a valid API key.",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                    }
                ],
            }
        },
        "Fatal",
    ),
    (
        "gemini",
        400,
        {
            "error": {
                "code": 400,
                "status": "FAILED_PRECONDITION",
                "message": "User location is not supported for the API use.",
            }
        },
        "Fatal",
    ),
]


@pytest.mark.parametrize(("protocol", "status", "body", "kind"), REAL_BODIES)
def test_each_error_is_classified_by_its_scope(protocol, status, body, kind):
    error = provider_for(protocol).error(status, _headers(), orjson.dumps(body))
    assert type(error).__name__ == kind
    assert str(error).startswith(("refused, prompt filtered: ", f"{status} from {protocol}/"))
    if "API_KEY_INVALID" in str(body):
        assert "fix: the API key was rejected: check HOSTILE_GEMINI_KEY" in str(error)


# --- nothing a server sends may end a run --------------------------------------------------


def _any_json():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=6,
    )


def _bodies():
    """Success bodies of each protocol with any value in any of their fields, or any bytes."""
    from hypothesis import strategies as st

    v = _any_json()
    openai = st.fixed_dictionaries(
        {
            "choices": st.lists(
                st.fixed_dictionaries(
                    {
                        "message": st.fixed_dictionaries({"content": v, "refusal": v}) | v,
                        "finish_reason": v,
                    }
                ),
                max_size=2,
            )
            | v,
            "usage": st.fixed_dictionaries({"prompt_tokens": v, "completion_tokens": v}) | v,
            "model": v,
        }
    )
    anthropic = st.fixed_dictionaries(
        {
            "content": st.lists(
                st.fixed_dictionaries({"type": st.just("text") | v, "text": v}), max_size=2
            )
            | v,
            "stop_reason": v,
            "usage": st.fixed_dictionaries({"input_tokens": v, "output_tokens": v}) | v,
        }
    )
    gemini = st.fixed_dictionaries(
        {
            "candidates": st.lists(
                st.fixed_dictionaries(
                    {
                        "finishReason": st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY"]) | v,
                        "content": st.fixed_dictionaries(
                            {
                                "parts": st.lists(
                                    st.fixed_dictionaries({"text": v}) | v, max_size=2
                                )
                                | v
                            }
                        )
                        | v,
                    }
                ),
                max_size=2,
            )
            | v,
            "promptFeedback": v,
            "usageMetadata": st.fixed_dictionaries(
                {"promptTokenCount": v, "candidatesTokenCount": v, "thoughtsTokenCount": v}
            )
            | v,
        }
    )
    error = st.fixed_dictionaries(
        {
            "error": st.fixed_dictionaries(
                {
                    "message": v,
                    "code": v,
                    "details": st.lists(
                        st.fixed_dictionaries(
                            {
                                "@type": st.just("type.googleapis.com/google.rpc.RetryInfo"),
                                "retryDelay": v,
                            }
                        ),
                        max_size=2,
                    )
                    | v,
                }
            )
            | v
        }
    )
    return (openai | anthropic | gemini | error).map(lambda b: json.dumps(b).encode()) | st.binary(
        max_size=64
    )


HINT_HEADERS = [
    "retry-after",
    "retry-after-ms",
    *(
        f"x-ratelimit-{w}-{k}"
        for w in ("limit", "remaining", "reset")
        for k in ("requests", "tokens")
    ),
    *(
        f"anthropic-ratelimit-{k}-{w}"
        for w in ("limit", "remaining", "reset")
        for k in ("requests", "tokens")
    ),
]


def test_no_header_or_body_a_server_sends_raises_anything_but_a_provider_error():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from orchestrator.providers.base import Completion
    from orchestrator.providers.errors import ProviderError

    providers = {p: provider_for(p) for p in ("openai", "anthropic", "gemini")}
    values = (
        st.text(max_size=24)
        | st.floats().map(str)
        | st.integers().map(str)
        | st.sampled_from(
            [
                "inf",
                "nan",
                "1e400",
                "-0",
                "1_000",
                " 5 ",
                "2024-02-30T00:00:00Z",
                "Tue, 99 Feb 2024 25:00:00 GMT",
                "9999-12-31T23:59:59-23:59",
                "0001-01-01T00:00:00+23:59",
                "99999999999999999999h",
            ]
        )
    )

    @settings(max_examples=500, deadline=None, database=None)
    @given(
        protocol=st.sampled_from(sorted(providers)),
        status=st.sampled_from([200, 400, 401, 404, 408, 413, 429, 500, 503, 529]),
        headers=st.dictionaries(st.sampled_from(HINT_HEADERS), values),
        body=_bodies(),
    )
    def check(protocol, status, headers, body):
        provider, hdrs = providers[protocol], _headers(headers)
        if status == 200:
            try:
                completion = provider.completion(body, hdrs)
            except ProviderError as exc:
                outcome = exc
            else:
                assert isinstance(completion, Completion) and isinstance(completion.text, str)
                for n in (completion.usage or {}).values():
                    assert n is None or (isinstance(n, int) and n >= 0)
                return
        else:
            outcome = provider.error(status, hdrs, body)
        assert isinstance(outcome, ProviderError)
        assert outcome.retry_after is None or 0 <= outcome.retry_after < math.inf

    check()

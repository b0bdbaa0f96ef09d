"""The emulator speaks the real protocols: the official SDKs and our adapters see the same things."""

from __future__ import annotations

from datetime import UTC

import anthropic
import anyio
import openai
import pytest

from orchestrator.emulator.server import Faults
from orchestrator.plan import Plan
from orchestrator.providers.errors import Fatal, RateLimited, Refused
from orchestrator.providers.registry import make_provider
from orchestrator.providers.replies import seconds_until
from orchestrator.session import build_campaign
from orchestrator.spec.campaign import CampaignConfig
from orchestrator.spec.limits import LimitConfig

SYSTEM = "Answer the task directly. Return only the requested JSON object."
PROMPT = 'Choose Continue or Stop. Return JSON only: {"choice": "Continue"} or {"choice": "Stop"}.'


def sdk_call(protocol: str, server, model: str):
    """(text, prompt tokens, completion tokens) through the vendor's own SDK."""
    if protocol == "openai":
        client = openai.OpenAI(base_url=server.base_url("openai"), api_key="sk-x", max_retries=0)
        r = client.chat.completions.create(
            model=model,
            max_tokens=20,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}],
        )
        if r.choices[0].finish_reason == "content_filter":
            raise Refused("content_filter")
        return r.choices[0].message.content, r.usage.prompt_tokens, r.usage.completion_tokens
    client = anthropic.Anthropic(
        base_url=server.base_url("anthropic"), api_key="sk-x", max_retries=0
    )
    r = client.messages.create(
        model=model, max_tokens=20, system=SYSTEM, messages=[{"role": "user", "content": PROMPT}]
    )
    if r.stop_reason == "refusal":
        raise Refused("refusal")
    return r.content[0].text, r.usage.input_tokens, r.usage.output_tokens


def adapter_call(protocol: str, server, model: str):
    """The same call through our adapter."""
    cfg = CampaignConfig(
        name="p",
        jobs=["paired"],
        samples=1,
        models=[{"provider": protocol, "name": model, "base_url": server.base_url(protocol)}],
    )
    task = next(
        t
        for t in Plan(build_campaign(cfg, None)).tasks()
        if t.cell.experiment.slug == "escalation-past-investment"
    )
    provider = make_provider(cfg.models[0], LimitConfig())

    async def call():
        try:
            return await provider.complete(task)
        finally:
            await provider.aclose()

    c = anyio.run(call)
    return c.text, c.usage["prompt_tokens"], c.usage["completion_tokens"]


CALLERS = {"sdk": sdk_call, "adapter": adapter_call}
SDK_PROTOCOLS = ["openai", "anthropic"]


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("protocol", SDK_PROTOCOLS)
def test_a_completion(emulator, caller, protocol):
    server = emulator()
    text, prompt_tokens, completion_tokens = CALLERS[caller](protocol, server, "m-1")
    assert text in ('{"choice":"Continue"}', '{"choice":"Stop"}')
    assert prompt_tokens > 20 and completion_tokens > 0
    body = server.log.bodies[-1]
    assert body["model"] == "m-1"


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("protocol", SDK_PROTOCOLS)
def test_a_rate_limit_with_its_retry_hint(emulator, caller, protocol):
    server = emulator(rpm=1, period_s=30.0)
    CALLERS[caller](protocol, server, "m-1")
    errors = (RateLimited, openai.RateLimitError, anthropic.RateLimitError)
    with pytest.raises(errors) as info:
        CALLERS[caller](protocol, server, "m-1")
    if caller == "adapter":
        assert 25 < info.value.retry_after <= 30
        assert (
            info.value.rate.limit_requests == 2 and info.value.rate.remaining_requests == 0
        )  # per minute
    else:
        assert 25 < float(info.value.response.headers["retry-after"]) <= 30


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("protocol", SDK_PROTOCOLS)
def test_an_unknown_model_is_a_not_found_error(emulator, caller, protocol):
    server = emulator()
    with pytest.raises((Fatal, openai.NotFoundError, anthropic.NotFoundError)) as info:
        CALLERS[caller](protocol, server, "missing-model")
    if caller == "adapter":
        assert "check the model name 'missing-model'" in str(info.value)


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("protocol", SDK_PROTOCOLS)
def test_a_refusal(emulator, caller, protocol):
    server = emulator(Faults(refusal=1.0))
    with pytest.raises(Refused):
        CALLERS[caller](protocol, server, "m-1")


def test_overload_is_529_for_anthropic_and_rate_limited_for_the_adapter(emulator):
    server = emulator(Faults(overloaded=1.0))
    with pytest.raises(anthropic.InternalServerError) as info:
        sdk_call("anthropic", server, "m-1")
    assert info.value.status_code == 529
    with pytest.raises(RateLimited):
        adapter_call("anthropic", server, "m-1")


@pytest.mark.parametrize("fault", ["refusal", "rate_limited", "overloaded"])
def test_gemini_answers_and_failures(emulator, fault):
    server = emulator()
    text, prompt_tokens, _ = adapter_call("gemini", server, "gemini-test")
    assert text in ('{"choice":"Continue"}', '{"choice":"Stop"}') and prompt_tokens > 20
    assert server.log.bodies[-1]["systemInstruction"]["parts"][0]["text"].startswith(
        "Answer the task"
    )
    setattr(server.config.faults, fault, 1.0)
    expected = {"refusal": Refused, "rate_limited": RateLimited, "overloaded": RateLimited}[fault]
    with pytest.raises(expected) as info:
        adapter_call("gemini", server, "gemini-test")
    if fault == "rate_limited":
        assert info.value.retry_after == pytest.approx(0.05)  # from the RetryInfo detail


@pytest.mark.parametrize(
    ("hint", "seconds"),
    [
        ("2", 2.0),
        ("0.25", 0.25),
        ("6m0s", 360.0),
        ("1m30.5s", 90.5),
        ("120ms", 0.12),
        ("", None),
        ("soon", None),
    ],
)
def test_retry_and_reset_hints(hint, seconds):
    assert seconds_until(hint) == (pytest.approx(seconds) if seconds is not None else None)


def test_rfc3339_and_http_date_hints():
    from datetime import datetime, timedelta
    from email.utils import format_datetime

    later = datetime.now(UTC) + timedelta(seconds=30)
    assert 28 < seconds_until(later.isoformat()) <= 30
    assert 27 < seconds_until(format_datetime(later, usegmt=True)) <= 30

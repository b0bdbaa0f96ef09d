"""The emulator serves reasoning models as the real APIs do: OpenAI's refusals and hidden
reasoning tokens, DeepSeek's and OpenRouter's visible traces, Anthropic's extended thinking and
structured-output beta, Gemini's thought parts; online and in a batch alike. Exact error bodies
over raw HTTP, answers through the official SDKs."""

from __future__ import annotations

import base64
import io
import json
import urllib.error
import urllib.request

import anthropic
import jsonschema
import openai
import pytest

from orchestrator.emulator.answers import tokens
from orchestrator.emulator.reasoning import r1_style, trace
from tests.test_emulator_batch import anthropic_client, jsonl, openai_client, until

PROMPT = 'Choose Continue or Stop. Return JSON only: {"choice": "Continue"} or {"choice": "Stop"}.'
ANCHORED = "A supplier quotes €1,500 for 18 working days of work. " + PROMPT
FIELDS = {"verdict": {"enum": ["go", "halt"]}, "confidence": {"type": "integer", "maximum": 7}}
SCHEMA = {
    "type": "object",
    "properties": FIELDS,
    "required": ["verdict", "confidence"],
}  # not the prompt's
USER = [{"role": "user", "content": PROMPT}]
DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    hs = {"Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, json.dumps(body).encode(), hs, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def chat(server, model: str, prompt: str = PROMPT, **params) -> tuple[int, dict]:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], **params}
    return post(server.url + "/v1/chat/completions", body, {"Authorization": "Bearer k"})


def messages(server, headers: dict | None = None, **params) -> tuple[int, dict]:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 2048, "messages": USER, **params}
    hs = {"x-api-key": "k", "anthropic-version": "2023-06-01", **(headers or {})}
    return post(server.url + "/v1/messages", body, hs)


def gemini(server, thinking: dict | None, max_tokens: int = 1024) -> dict:
    config: dict = {"maxOutputTokens": max_tokens}
    if thinking is not None:
        config["thinkingConfig"] = thinking
    body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}], "generationConfig": config}
    url = server.url + "/v1beta/models/gemini-2.5-flash:generateContent"
    status, answer = post(url, body, {"x-goog-api-key": "k"})
    assert status == 200
    return answer


def openai_error(message: str, param: str | None = None, code: str | None = None) -> dict:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }


def anthropic_error(message: str) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


# --- OpenAI's reasoning models -------------------------------------------------------------
MAX_TOKENS_REFUSED = openai_error(
    "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead.",
    "max_tokens",
    "unsupported_parameter",
)
TEMPERATURE = lambda v: openai_error(
    f"Unsupported value: 'temperature' does not support {v} with this model. "
    "Only the default (1) value is supported.",
    "temperature",
    "unsupported_value",
)
EFFORT = openai_error(
    "Invalid value: 'extreme'. Supported values are: 'minimal', 'low', 'medium', and 'high'.",
    "reasoning_effort",
    "invalid_value",
)
TOP_P = openai_error(
    "Unsupported parameter: 'top_p' is not supported with this model.",
    "top_p",
    "unsupported_parameter",
)
UNRECOGNIZED = openai_error("Unrecognized request argument supplied: reasoning_effort")


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        ("gpt-5", {"max_tokens": 100}, MAX_TOKENS_REFUSED),
        ("o1", {"max_tokens": 100, "max_completion_tokens": 100}, MAX_TOKENS_REFUSED),
        ("o3-mini", {"temperature": 0.7}, TEMPERATURE("0.7")),
        ("openai/gpt-5-mini", {"temperature": 0}, TEMPERATURE("0")),
        ("gpt-5.1", {"temperature": 1.5}, TEMPERATURE("1.5")),
        ("o4-mini", {"top_p": 0.9}, TOP_P),
        ("gpt-5", {"reasoning_effort": "extreme"}, EFFORT),
        ("gpt-4o", {"reasoning_effort": "low"}, UNRECOGNIZED),
        ("gpt-5-chat-latest", {"reasoning_effort": "low"}, UNRECOGNIZED),
    ],
)
def test_openai_refusals_of_reasoning_parameters(emulator, model, params, expected):
    server = emulator()
    assert chat(server, model, **params) == (400, expected)
    assert server.log.bodies[-1]["model"] == model  # logged as sent
    with pytest.raises(openai.BadRequestError) as info:  # and the SDK reads it as the real one
        openai_client(server).chat.completions.create(model=model, messages=USER, **params)
    assert info.value.code == expected["error"]["code"]
    assert info.value.param == expected["error"]["param"]


def test_temperature_1_and_chat_models_are_served(emulator):
    server = emulator()
    assert chat(server, "gpt-5", temperature=1, top_p=1.0)[0] == 200
    status, body = chat(server, "gpt-5-chat-latest", max_tokens=50, temperature=0.7)
    assert status == 200 and "completion_tokens_details" not in body["usage"]
    assert chat(server, "gpt-4o", max_tokens=50, temperature=0.7)[0] == 200


def test_openai_reasoning_usage_through_the_sdk(emulator):
    server = emulator()
    r = openai_client(server).chat.completions.create(
        model="gpt-5-mini", max_completion_tokens=1000, messages=USER
    )
    message, usage = r.choices[0].message, r.usage
    assert json.loads(message.content)["choice"] in ("Continue", "Stop")
    assert r.choices[0].finish_reason == "stop"
    assert "reasoning_content" not in (message.model_extra or {})  # OpenAI shows no reasoning
    assert usage.completion_tokens_details.reasoning_tokens == 128
    assert usage.completion_tokens == 128 + tokens(message.content)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    extra = ("audio_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens")
    want = {"reasoning_tokens": 128} | dict.fromkeys(extra, 0)
    assert usage.completion_tokens_details.model_dump(exclude_none=True) == want
    cached = usage.prompt_tokens_details.model_dump(exclude_none=True)
    assert cached == {"cached_tokens": 0, "audio_tokens": 0}
    assert server.log.admitted_tokens[-1][2] == usage.prompt_tokens + 1000


@pytest.mark.parametrize(
    ("effort", "spent"), [("minimal", 0), ("low", 50), ("medium", 100), ("high", 200), (None, 100)]
)
def test_reasoning_effort_scales_the_reasoning_tokens(emulator, effort, spent):
    server = emulator(reasoning_tokens=100)
    params = {"reasoning_effort": effort} if effort else {}
    status, body = chat(server, "o3", max_completion_tokens=5000, **params)
    assert status == 200
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == spent
    answer = body["choices"][0]["message"]["content"]
    assert body["usage"]["completion_tokens"] == spent + tokens(answer)


def test_reasoning_that_uses_the_allowance_leaves_no_answer(emulator):
    server = emulator()
    client = openai_client(server)
    ask = lambda effort, limit: client.chat.completions.create(
        model="o4-mini", reasoning_effort=effort, max_completion_tokens=limit, messages=USER
    )
    cut = ask("high", 200)  # 256 reasoning tokens > 200
    assert cut.choices[0].finish_reason == "length" and cut.choices[0].message.content == ""
    assert cut.usage.completion_tokens == 200
    assert cut.usage.completion_tokens_details.reasoning_tokens == 200
    whole = ask("low", 200)  # 64 reasoning tokens and the answer fit
    assert whole.choices[0].finish_reason == "stop" and json.loads(whole.choices[0].message.content)
    assert ask("medium", 130).choices[0].finish_reason == "length"  # 128 + the answer > 130


def test_a_name_in_reasoning_models_gets_the_reasoning_rules(emulator):
    server = emulator(reasoning_models=frozenset({"house-model"}))
    assert chat(server, "house-model", max_tokens=100) == (400, MAX_TOKENS_REFUSED)
    status, body = chat(server, "house-model", max_completion_tokens=500)
    assert status == 200 and body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 128
    assert chat(server, "other-model", max_tokens=100)[0] == 200


# --- OpenAI-compatible reasoning servers ---------------------------------------------------
@pytest.mark.parametrize(
    "model",
    ["deepseek-reasoner", "deepseek-r1", "deepseek/deepseek-r1", "deepseek-r1-distill-qwen-7b"],
)
def test_r1_style_servers_show_reasoning_content(emulator, model):
    server = emulator()
    r = openai_client(server).chat.completions.create(
        model=model,
        max_tokens=500,
        temperature=0.6,  # ignored, not refused
        messages=[{"role": "user", "content": ANCHORED}],
    )
    message = r.choices[0].message
    shown = message.model_extra["reasoning_content"]
    assert shown == message.reasoning_content == trace(ANCHORED)
    assert json.loads(message.content)["choice"] in ("Continue", "Stop")
    assert "reasoning" not in message.model_extra
    spent = r.usage.completion_tokens_details.reasoning_tokens
    assert spent == tokens(shown) and r.usage.completion_tokens == spent + tokens(message.content)


def test_which_names_are_r1_style():
    for name in ("deepseek-r1:14b", "r1", "acme-reasoner-v2", "DeepSeek-R1"):
        assert r1_style(name), name
    for name in ("gpt-4o", "r10-base", "qr1", "deepseek-v3", "llama-r1x"):
        assert not r1_style(name), name


@pytest.mark.parametrize(
    "extra", [{"include_reasoning": True}, {"reasoning": {"effort": "high"}}, {"reasoning": {}}]
)
def test_openrouter_request_fields_get_openrouter_reasoning(emulator, extra):
    server = emulator()
    r = openai_client(server).chat.completions.create(
        model="deepseek/deepseek-r1", max_tokens=500, messages=USER, extra_body=extra
    )
    message = r.choices[0].message
    assert message.model_extra["reasoning"] == trace(PROMPT)
    assert message.model_extra["reasoning_details"] == [
        {"type": "reasoning.text", "text": trace(PROMPT), "format": "unknown", "index": 0}
    ]
    assert "reasoning_content" not in message.model_extra
    assert r.usage.completion_tokens_details.reasoning_tokens == tokens(trace(PROMPT))


# --- the trace ------------------------------------------------------------------------------
def test_the_default_trace_follows_the_prompt():
    steps = [line for line in trace(ANCHORED).splitlines() if line.strip()]
    assert len(steps) >= 4 and trace(ANCHORED) == trace(ANCHORED)
    assert ANCHORED[:60] in steps[0]
    assert (
        "The prompt mentions €1,500; I take it as my starting point and adjust from there." in steps
    )
    assert "No figure is given, so I reason from typical cases." in trace(PROMPT).splitlines()
    assert "The prompt mentions 700;" in trace("Is 700 too much? Answer yes or no.")
    for line in ("I weigh what matters most here.", "So I give my answer in the format asked."):
        assert line in steps


def test_the_reasoner_hook_writes_the_trace(emulator):
    seen = []

    def reasoner(protocol, body):
        seen.append(protocol)
        return "hooked\ntrace" if protocol == "anthropic" else None

    server = emulator(reasoner=reasoner)
    status, body = messages(server, thinking={"type": "enabled", "budget_tokens": 1024})
    assert status == 200 and body["content"][0]["thinking"] == "hooked\ntrace"
    status, body = chat(server, "deepseek-r1")
    assert body["choices"][0]["message"]["reasoning_content"] == trace(PROMPT)  # None: default
    assert seen == ["anthropic", "openai"]


# --- Anthropic's extended thinking ----------------------------------------------------------
ENABLED = {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"thinking": {"type": "enabled", "budget_tokens": 512}},
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            {"max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 2000}},
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {DOCS}#max-tokens-and-context-window-size",
        ),
        (
            {"thinking": ENABLED, "temperature": 0.5},
            "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. "
            "Please consult our documentation at "
            "https://platform.claude.com/docs/en/build-with-claude/extended-thinking",
        ),
        (
            {"thinking": ENABLED, "top_p": 0.9},
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled.",
        ),
        (
            {"output_format": {"type": "json_schema", "schema": SCHEMA}},
            "output_format: Extra inputs are not permitted",
        ),
    ],
)
def test_anthropic_refusals_with_thinking(emulator, params, message):
    server = emulator()
    assert messages(server, **params) == (400, anthropic_error(message))


def test_anthropic_thinking_blocks_through_the_sdk(emulator):
    server = emulator()
    r = anthropic_client(server).messages.create(
        model="claude-sonnet-4-5",
        max_tokens=2048,
        thinking=ENABLED,
        messages=[{"role": "user", "content": ANCHORED}],
        extra_body={"temperature": 1, "top_p": 0.95},  # allowed with thinking
    )
    assert [b.type for b in r.content] == ["thinking", "text"] and r.stop_reason == "end_turn"
    assert r.content[0].thinking == trace(ANCHORED)
    assert len(r.content[0].signature) > 40 and base64.b64decode(r.content[0].signature)
    assert json.loads(r.content[1].text)["choice"] in ("Continue", "Stop")
    assert r.usage.output_tokens == tokens(trace(ANCHORED)) + tokens(r.content[1].text)


def test_anthropic_thinking_disabled_is_no_thinking(emulator):
    server = emulator()
    status, body = messages(server, thinking={"type": "disabled"}, temperature=0.2)
    assert status == 200 and [b["type"] for b in body["content"]] == ["text"]
    assert body["usage"]["output_tokens"] == tokens(body["content"][0]["text"])


def test_anthropic_structured_outputs_need_the_beta_header(emulator):
    server, fmt = emulator(), {"type": "json_schema", "schema": SCHEMA}
    client = anthropic_client(server)
    ask = dict(model="claude-sonnet-4-5", max_tokens=256, messages=USER)
    shaped = lambda r: jsonschema.validate(json.loads(r.content[0].text), SCHEMA)
    beta = "structured-outputs-2025-11-13"
    shaped(client.beta.messages.create(**ask, betas=[beta], extra_body={"output_format": fmt}))
    many = {"anthropic-beta": f"files-api-2025-04-14, {beta}"}
    assert messages(server, many, output_format=fmt)[0] == 200
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(**ask, extra_body={"output_format": fmt})
    assert "output_format: Extra inputs are not permitted" in str(info.value)
    shaped(client.messages.create(**ask, output_config={"format": fmt}))  # GA's needs no beta


# --- Gemini's thinking ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("budget", "configured", "thoughts"),
    [(50, 0, 50), (1000, 0, 128), (1000, 40, 40), (-1, 0, 128), (-1, 300, 300), (0, 40, 0)],
)
def test_gemini_thinking_budget(emulator, budget, configured, thoughts):
    server = emulator(thoughts_tokens=configured)
    body = gemini(server, {"thinkingBudget": budget, "includeThoughts": True})
    candidate, usage = body["candidates"][0], body["usageMetadata"]
    parts = candidate["content"]["parts"]
    assert candidate["finishReason"] == "STOP" and usage.get("thoughtsTokenCount", 0) == thoughts
    if thoughts:
        assert parts[0] == {"text": trace(PROMPT), "thought": True}
        assert "thought" not in parts[1] and json.loads(parts[1]["text"])
    else:
        assert len(parts) == 1 and "thought" not in parts[0]
    answer = parts[-1]["text"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + tokens(answer) + thoughts


def test_gemini_thoughts_hidden_without_include_thoughts_and_the_old_knob(emulator):
    server = emulator(thoughts_tokens=30)
    body = gemini(server, {"thinkingBudget": 100})
    assert len(body["candidates"][0]["content"]["parts"]) == 1
    assert body["usageMetadata"]["thoughtsTokenCount"] == 30
    assert gemini(server, None)["usageMetadata"]["thoughtsTokenCount"] == 30  # no thinkingConfig
    cut = gemini(server, {"thinkingBudget": -1, "includeThoughts": True}, max_tokens=30)
    assert cut["candidates"][0]["finishReason"] == "MAX_TOKENS"  # thinking left no room


# --- batch items ----------------------------------------------------------------------------
def test_an_openai_batch_item_of_a_reasoning_model(emulator):
    server = emulator()
    client = openai_client(server)
    items = {
        "old": {"model": "gpt-5", "max_tokens": 100},
        "new": {"model": "gpt-5", "max_completion_tokens": 1000, "reasoning_effort": "low"},
    }
    url = "/v1/chat/completions"
    lines = [
        json.dumps({"custom_id": c, "method": "POST", "url": url, "body": {**p, "messages": USER}})
        for c, p in items.items()
    ]
    file_id = client.files.create(
        file=("in.jsonl", io.BytesIO("\n".join(lines).encode())), purpose="batch"
    ).id
    batch = client.batches.create(input_file_id=file_id, endpoint=url, completion_window="24h")
    done = until(lambda: client.batches.retrieve(batch.id), lambda b: b.status == "completed")
    errors = jsonl(client.files.content(done.error_file_id).text)
    out = jsonl(client.files.content(done.output_file_id).text)
    assert [e["custom_id"] for e in errors] == ["old"] and [o["custom_id"] for o in out] == ["new"]
    assert errors[0]["response"]["status_code"] == 400
    assert errors[0]["response"]["body"] == MAX_TOKENS_REFUSED
    usage = out[0]["response"]["body"]["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 64


def test_an_anthropic_batch_item_thinks_and_keeps_its_batch_betas(emulator):
    server = emulator()
    client = anthropic_client(server)
    fmt = {"type": "json_schema", "schema": SCHEMA}
    ask = lambda **p: {"model": "claude-3-7-sonnet", "max_tokens": 2048, "messages": USER, **p}
    requests = [
        {"custom_id": "think", "params": ask(thinking=ENABLED)},
        {"custom_id": "cold", "params": ask(thinking=ENABLED, temperature=0.2)},
        {"custom_id": "shaped", "params": ask(output_format=fmt)},
    ]
    plain = client.messages.batches.create(requests=requests)
    beta = client.messages.batches.create(
        requests=requests[2:], extra_headers={"anthropic-beta": "structured-outputs-2025-11-13"}
    )
    until(lambda: client.messages.batches.retrieve(beta.id), lambda b: b.ended_at is not None)
    results = {r.custom_id: r.result for r in client.messages.batches.results(plain.id)}
    assert [b.type for b in results["think"].message.content] == ["thinking", "text"]
    cold = results["cold"]
    assert cold.type == "errored" and "`temperature` may only be" in str(cold.error)
    assert results["shaped"].type == "errored"
    (shaped,) = client.messages.batches.results(beta.id)
    jsonschema.validate(json.loads(shaped.result.message.content[0].text), SCHEMA)

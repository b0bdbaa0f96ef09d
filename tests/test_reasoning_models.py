"""Reasoning models on first contact: what load refuses, what each provider is sent, what is read
back (the trace apart from the answer, reasoning tokens), and what the plan expects them to cost.
Over HTTP against the emulator: tests/test_reasoning_http.py."""

from __future__ import annotations

import sqlite3

import orjson
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from orchestrator.errors import UserError
from orchestrator.estimate import estimate
from orchestrator.plan import Plan
from orchestrator.providers.anthropic import AnthropicProvider
from orchestrator.providers.base import Completion
from orchestrator.providers.gemini import GeminiProvider
from orchestrator.providers.openai import OpenAIProvider, refuses_max_tokens
from orchestrator.session import load_campaign
from orchestrator.spec import reasoning
from tests.conftest import cli, write_config

NO_HEADERS = CIMultiDictProxy(CIMultiDict())


def _config(tmp_path, model: str, name: str = "campaign.toml"):
    return write_config(
        tmp_path,
        f"""
        name = "r"
        jobs = ["paired"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        {model}
        """,
        name,
    )


def _campaign(tmp_path, model: str):
    return load_campaign(_config(tmp_path, model))


def _cell(tmp_path, model: str):
    return Plan(_campaign(tmp_path, model)).cells[0]


O4 = 'provider = "openai"\nname = "o4-mini"\nbase_url = "http://127.0.0.1:9/v1"'
CLAUDE = 'provider = "anthropic"\nname = "claude-sonnet-4-5"\nbase_url = "http://127.0.0.1:9"'
GEMINI = 'provider = "gemini"\nname = "gemini-2.5-flash"\nbase_url = "http://127.0.0.1:9"'


@pytest.mark.parametrize(
    ("model", "field", "words"),
    [
        (f"{O4}\ntemperature = 0.7", "models[0].temperature", "reasoning model"),
        (f"{O4}\ntop_p = 0.5", "models[0].top_p", "reasoning model"),
        (f'{O4}\nreasoning_effort = "minimal"', "models[0].reasoning_effort", "gpt-5"),
        (
            'provider = "openai"\nname = "gpt-4o"\nbase_url = "http://x/v1"\n'
            'reasoning_effort = "low"',
            "models[0].reasoning_effort",
            "not known as a reasoning model",
        ),
        (f"{O4}\nthinking_budget = 2048", "models[0].thinking_budget", "reasoning_effort"),
        (
            f"{CLAUDE}\nthinking_budget = 1000\nmax_tokens = 4096",
            "models[0].thinking_budget",
            "1,024",
        ),
        (
            f"{CLAUDE}\nthinking_budget = 2048\nmax_tokens = 2048",
            "models[0].max_tokens",
            "more than",
        ),
        (
            f"{CLAUDE}\nthinking_budget = 1024\nmax_tokens = 4096\ntemperature = 0",
            "models[0].temperature",
            "temperature 1 only",
        ),
        (f'{CLAUDE}\nreasoning_effort = "high"', "models[0].reasoning_effort", "thinking_budget"),
        (f"{GEMINI}\nreasoning = true", "models[0].reasoning", "thinking_budget"),
        (f"{GEMINI}\nthinking_budget = -2", "models[0].thinking_budget", "-1"),
        (f"{O4}\nextra_body = {{messages = []}}", "models[0].extra_body.messages", "writes it"),
        (
            f"{O4}\nextra_body = {{temperature = 0}}",
            "models[0].extra_body.temperature",
            "writes it",
        ),
        (
            f'{O4}\nextra_body = {{provider = {{api_key = "x"}}}}',
            "models[0].extra_body.provider.api_key",
            "credential",
        ),
        (
            f'{O4}\nextra_body = {{note = "sk-proj-abcdefghijklmnop"}}',
            "models[0].extra_body.note",
            "credential",
        ),
        (
            CLAUDE.replace("claude-sonnet-4-5", "claude-3-5-haiku-latest")
            + "\nstructured_output = true",
            "models[0].structured_output",
            "JSON outputs",
        ),
        (
            f'{O4}\nheaders_env = {{"X-Title" = "not a name!"}}',
            "models[0].headers_env.X-Title",
            "environment",
        ),
        (
            f'{O4}\nheaders_env = {{"Content-Type" = "CT"}}',
            "models[0].headers_env.Content-Type",
            "header",
        ),
    ],
)
def test_load_refuses_what_the_api_would_refuse(tmp_path, model, field, words):
    with pytest.raises(UserError) as caught:
        _campaign(tmp_path, model)
    assert caught.value.field == field
    assert words in str(caught.value) + (caught.value.fix or "")


def test_the_refusal_is_exit_2_naming_the_field_and_nothing_is_written(tmp_path):
    config = _config(tmp_path, f"{O4}\ntemperature = 0.7")
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert "models[0].temperature" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_header_variable_that_is_not_set_is_named_never_its_value(tmp_path, monkeypatch):
    monkeypatch.delenv("MY_TITLE", raising=False)
    config = _config(tmp_path, f'{O4}\nheaders_env = {{"X-Title" = "MY_TITLE"}}')
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    assert "MY_TITLE is not set" in said and "headers_env.X-Title" in said


def test_openai_reasoning_models_are_known_by_name_or_flag(tmp_path):
    def model(text):
        return _campaign(tmp_path, text).config.models[0]

    for name in ("o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "openai/o4-mini"):
        assert reasoning.openai_reasoning(model(O4.replace("o4-mini", name)))
    for name in ("gpt-4o-mini", "gpt-5-chat-latest", "deepseek-reasoner", "omni-7b"):
        assert not reasoning.openai_reasoning(model(O4.replace("o4-mini", name)))
    assert reasoning.openai_reasoning(
        model(O4.replace("o4-mini", "house-7") + "\nreasoning = true")
    )
    assert not reasoning.openai_reasoning(model(O4 + "\nreasoning = false"))
    # a DeepSeek-like name reasons (the plan allows for it) but keeps the chat request shape
    assert reasoning.reasons(model(O4.replace("o4-mini", "deepseek-reasoner")))


def test_o_series_request_max_completion_tokens_and_effort_no_temperature(tmp_path):
    cell = _cell(tmp_path, f'{O4}\nmax_tokens = 2048\nreasoning_effort = "high"')
    body = OpenAIProvider(cell.model).request(cell)
    assert body["max_completion_tokens"] == 2048 and "max_tokens" not in body
    assert body["reasoning_effort"] == "high" and "temperature" not in body


def test_temperature_1_on_a_reasoning_model_is_left_out(tmp_path):
    cell = _cell(tmp_path, f"{O4}\ntemperature = 1.0\ntop_p = 1.0")
    body = OpenAIProvider(cell.model).request(cell)
    assert "temperature" not in body and "top_p" not in body  # o3-mini refuses even 1


def test_a_refused_max_tokens_in_a_batch_names_the_fix(tmp_path):
    provider = OpenAIProvider(
        _campaign(tmp_path, O4.replace("o4-mini", "house-7")).config.models[0]
    )
    body = orjson.dumps(
        {
            "error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this "
                "model. Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "unsupported_parameter",
            }
        }
    )
    assert "set reasoning = true on the model" in str(provider.error(400, NO_HEADERS, body))


def test_claude_json_outputs_drop_string_length_limits(tmp_path):
    from orchestrator.providers.anthropic import anthropic_schema
    from orchestrator.spec.models import ResponseContract

    judged = ResponseContract(kind="judgment", minimum=1, maximum=5, options=("pass", "fail"))
    schema = anthropic_schema(judged)
    assert "maxLength" not in schema["properties"]["reason"]
    assert schema["properties"]["verdict"]["enum"] == ["pass", "fail"]


def test_a_chat_model_request_is_unchanged(tmp_path):
    cell = _cell(tmp_path, O4.replace("o4-mini", "gpt-4o-mini") + "\ntemperature = 0.7")
    body = OpenAIProvider(cell.model).request(cell)
    assert body["max_tokens"] == 256 and body["temperature"] == 0.7
    assert "max_completion_tokens" not in body and "reasoning_effort" not in body


def test_reasoning_settings_are_part_of_the_identity_only_when_set(tmp_path):
    plain = _campaign(tmp_path, O4).config.models[0]
    assert "reasoning_effort" not in plain.identity() and "extra_body" not in plain.identity()
    low = _campaign(tmp_path, O4 + '\nreasoning_effort = "low"').config.models[0]
    high = _campaign(tmp_path, O4 + '\nreasoning_effort = "high"').config.models[0]
    assert len({plain.key, low.key, high.key}) == 3
    routed = _campaign(tmp_path, O4 + '\nextra_body = {provider = {order = ["a"]}}')
    assert routed.config.models[0].identity()["extra_body"] == {"provider": {"order": ["a"]}}
    with_header = _campaign(tmp_path, O4 + '\nheaders_env = {"X-Title" = "HOME"}')
    assert with_header.config.models[0].key == plain.key  # a header's value is no identity


def test_claude_thinking_request(tmp_path):
    cell = _cell(tmp_path, f"{CLAUDE}\nthinking_budget = 1024\nmax_tokens = 4096")
    body = AnthropicProvider(cell.model).request(cell)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == 4096 and "temperature" not in body


def test_claude_structured_output_uses_json_outputs(tmp_path):
    cell = _cell(tmp_path, f"{CLAUDE}\nstructured_output = true")
    body = AnthropicProvider(cell.model).request(cell)
    schema = body["output_config"]["format"]
    assert schema["type"] == "json_schema" and schema["schema"]["additionalProperties"] is False


def test_gemini_thinking_request(tmp_path):
    cell = _cell(tmp_path, f"{GEMINI}\nthinking_budget = 2048")
    config = GeminiProvider(cell.model).request(cell)["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingBudget": 2048, "includeThoughts": True}
    off = _cell(tmp_path, f"{GEMINI}\nthinking_budget = 0")
    assert GeminiProvider(off.model).request(off)["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 0
    }


def test_extra_body_merges_key_by_key(tmp_path):
    cell = _cell(
        tmp_path,
        f"{GEMINI}\nthinking_budget = 512\n"
        'extra_body = {generationConfig = {candidateCount = 1}, labels = {team = "a"}}',
    )
    provider = GeminiProvider(cell.model)
    from orchestrator.plan import Task

    body = orjson.loads(provider.body(Task("0" * 32, cell, 1)))
    assert body["generationConfig"]["candidateCount"] == 1
    assert body["generationConfig"]["thinkingConfig"]["thinkingBudget"] == 512  # kept
    assert body["labels"] == {"team": "a"}


def test_header_values_come_from_the_environment_and_are_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "secret-key-123456")
    monkeypatch.setenv("MY_TITLE", "title-value-42")
    cell = _cell(
        tmp_path,
        f'{O4}\napi_key_env = "MY_KEY"\napi_key_header = "api-key"\n'
        'headers_env = {"X-Title" = "MY_TITLE"}',
    )
    provider = OpenAIProvider(cell.model)
    headers = provider.session_headers()
    assert headers["api-key"] == "secret-key-123456" and "Authorization" not in headers
    assert headers["X-Title"] == "title-value-42"
    assert provider.scrub("echo secret-key-123456 and title-value-42") == "echo *** and ***"


def test_the_refusal_of_max_tokens_is_read_from_the_providers_own_body():
    body = {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
    assert refuses_max_tokens(orjson.dumps(body))
    body["error"].update(param="temperature", message="Unsupported value: 'temperature'")
    assert not refuses_max_tokens(orjson.dumps(body))
    assert not refuses_max_tokens(b"<html>bad gateway</html>")


def _openai_answer(message: dict, usage: dict | None = None) -> bytes:
    return orjson.dumps(
        {
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 300},
        }
    )


def test_openai_compatible_reasoning_is_kept_apart_from_the_answer(tmp_path):
    provider = OpenAIProvider(_campaign(tmp_path, O4).config.models[0])
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 300,
        "completion_tokens_details": {"reasoning_tokens": 280},
    }
    deepseek = provider.completion(
        _openai_answer(
            {"role": "assistant", "content": '{"value": 3}', "reasoning_content": "Step 1\nStep 2"},
            usage,
        ),
        NO_HEADERS,
    )
    assert deepseek.text == '{"value": 3}' and deepseek.reasoning == "Step 1\nStep 2"
    assert deepseek.usage == {
        "prompt_tokens": 10,
        "completion_tokens": 300,
        "reasoning_tokens": 280,
    }
    router = provider.completion(
        _openai_answer({"role": "assistant", "content": "x", "reasoning": "Thought"}), NO_HEADERS
    )
    assert router.reasoning == "Thought"
    assert provider.completion(_openai_answer({"content": "x"}), NO_HEADERS).reasoning is None
    assert deepseek.max_tokens_param == "max_completion_tokens"  # o4-mini's request said so


def test_claude_answer_is_the_text_blocks_and_thinking_is_kept(tmp_path):
    provider = AnthropicProvider(_campaign(tmp_path, CLAUDE).config.models[0])
    payload = {
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "First I note the anchor.", "signature": "EqQB"},
            {"type": "redacted_thinking", "data": "abc"},
            {"type": "text", "text": '{"value": 900}'},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 50, "output_tokens": 700},
    }
    completion = provider.completion(orjson.dumps(payload), NO_HEADERS)
    assert completion.text == '{"value": 900}'
    assert completion.reasoning == "First I note the anchor."
    assert completion.usage == {"prompt_tokens": 50, "completion_tokens": 700}  # thinking within
    payload["usage"]["output_tokens_details"] = {"thinking_tokens": 650}
    counted = provider.completion(orjson.dumps(payload), NO_HEADERS)
    assert counted.usage["reasoning_tokens"] == 650


def test_gemini_thought_parts_are_kept_apart_and_billed(tmp_path):
    provider = GeminiProvider(_campaign(tmp_path, GEMINI).config.models[0])
    payload = {
        "candidates": [
            {
                "finishReason": "STOP",
                "content": {
                    "role": "model",
                    "parts": [{"text": "**Weighing**", "thought": True}, {"text": '{"value": 2}'}],
                },
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 30,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 400,
        },
    }
    completion = provider.completion(orjson.dumps(payload), NO_HEADERS)
    assert completion.text == '{"value": 2}' and completion.reasoning == "**Weighing**"
    assert completion.usage == {
        "prompt_tokens": 30,
        "completion_tokens": 405,
        "reasoning_tokens": 400,
    }


def test_the_plan_allows_for_reasoning_and_says_so(tmp_path):
    campaign = _campaign(tmp_path, f'{O4}\nmax_tokens = 4096\nreasoning_effort = "low"')
    (chat,) = estimate(Plan(_campaign(tmp_path, O4.replace("o4-mini", "gpt-4o-mini")))).values()
    (thinker,) = estimate(Plan(campaign)).values()
    calls = thinker.calls
    assert thinker.reasoning_tokens == reasoning.EFFORT_ALLOWANCE["low"]
    assert thinker.output_typical == calls * (16 + reasoning.EFFORT_ALLOWANCE["low"])
    assert chat.reasoning_tokens == 0 and chat.output_typical == calls * 16
    claude = _campaign(tmp_path, f"{CLAUDE}\nthinking_budget = 2048\nmax_tokens = 4096")
    (e,) = estimate(Plan(claude)).values()
    assert e.reasoning_tokens == 2048 and "thinking_budget" in e.reasoning_basis
    # capped within max_tokens, which holds thinking and answer alike
    small = _campaign(tmp_path, f"{O4}\nmax_tokens = 100")
    assert next(iter(estimate(Plan(small)).values())).reasoning_tokens == 100 - 16
    shown = cli(
        "plan",
        str(_config(tmp_path, f'{O4}\nreasoning_effort = "low"\nmax_tokens = 4096')),
        cwd=tmp_path,
    )
    assert "reasoning allowance of ~512 tokens a call (reasoning_effort low)" in " ".join(
        shown.stdout.split()
    )
    cramped = cli("plan", str(_config(tmp_path, O4)), cwd=tmp_path)  # max_tokens at 256
    assert "may leave no room for the answer" in " ".join(cramped.stdout.split())


def test_a_reasoning_trace_survives_the_response_cache(tmp_path):
    from orchestrator.cache.store import ResponseCache

    cache = ResponseCache(tmp_path / "c.sqlite", "run-1", read=True, warn=print)
    cache.put(b"k" * 16, Completion("{}", usage={"prompt_tokens": 1}, reasoning="Step 1"), "m")
    cache.flush()
    again = ResponseCache(tmp_path / "c.sqlite", "run-2", read=True, warn=print)
    assert again.get(b"k" * 16).reasoning == "Step 1"


def test_a_cache_file_stays_usable_by_a_release_from_before_traces(tmp_path):
    """Traces live in a table of their own: the old release's 10-column insert and select
    still work on a file the new one wrote, and the new one reads the old one's rows."""
    from orchestrator.cache.store import ResponseCache

    path = tmp_path / "shared.sqlite"
    new = ResponseCache(path, "r-new", read=True, warn=pytest.fail)
    new.put(b"n" * 16, Completion("{}", usage={"prompt_tokens": 1}, reasoning="Step"), "m")
    new.close()
    old_put = "INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    conn = sqlite3.connect(path)
    conn.execute(old_put, (b"o" * 16, "t", None, None, None, None, None, "r-old", "m", 0.0))
    conn.commit()
    conn.close()
    again = ResponseCache(path, "r-3", read=True, warn=pytest.fail)
    assert again.get(b"o" * 16).text == "t" and again.get(b"o" * 16).reasoning is None
    assert again.get(b"n" * 16).reasoning == "Step"

"""A key escapes no mask when a server escapes it (issue item 6): a message that quotes a key
JSON-escaped (`\\/`, `\\u002b`, any character as `\\uXXXX`) or URL-encoded (`%2F`, `+` for a
space) shows `***`, and so does an answer, or its reasoning, that echoes the key."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web

from orchestrator.batch.clients import batch_api
from orchestrator.providers.errors import Refused
from orchestrator.providers.openai import OpenAIProvider
from orchestrator.providers.registry import make_provider
from orchestrator.providers.safety import secret_pattern
from orchestrator.spec.campaign import ModelConfig
from orchestrator.spec.limits import LimitConfig
from tests.conftest import cli
from tests.test_untrusted_servers import Loopback, _config

KEY = "sk-test/abc+def_0123456789"
ENV = "SECRET_KEY_FOR_TEST"  # the variable test_untrusted_servers._config names

# Every way a server may write the key back: JSON escapes (any hex case, any character, `\/`),
# URL encoding (any hex case), and a mix of both within one key.
FORMS = {
    "plain": KEY,
    "json slash": r"sk-test\/abc+def_0123456789",
    "json plus": r"sk-test/abc\u002bdef_0123456789",
    "json upper hex": r"sk-test\/abc\u002Bdef_0123456789",
    "json letter": r"\u0073k-test\/abc\u002bdef_0123456789",
    "json every char": "".join(f"\\u{ord(c):04X}" for c in KEY),
    "url": "sk-test%2Fabc%2bdef_0123456789",
    "url lower hex": "sk-test%2fabc%2Bdef_0123456789",
    "url every char": "".join(f"%{b:02x}" for b in KEY.encode()),
    "mixed": r"\u0073k-test%2Fabc\u002bdef_0123456789",
}


def flat(text: str) -> str:
    """The text without any whitespace: a key a console wrapped in two still shows whole."""
    return "".join(text.split())


def leaked(text: str) -> list[str]:
    squeezed = flat(text)
    return [name for name, form in FORMS.items() if form in text or form in squeezed]


# --- the pattern ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FORMS)
def test_every_form_of_a_key_is_masked(name):
    mask = secret_pattern([KEY])
    assert mask is not None
    said = f'{{"Authorization": "Bearer {FORMS[name]}", "x": 1}}'
    assert mask.sub("***", said) == '{"Authorization": "Bearer ***", "x": 1}'


def test_a_provider_scrubs_every_form_of_its_key():
    provider = OpenAIProvider(
        ModelConfig(provider="openai", name="m", base_url="http://127.0.0.1:9"), key=KEY
    )
    for name, form in FORMS.items():
        assert provider.scrub(f"401: {form}.") == "401: ***.", name


def test_a_header_value_with_spaces_is_masked_url_encoded():
    token = "Token abc 0123456789xyz"
    mask = secret_pattern([token])
    assert mask is not None
    for form in (token, "Token+abc+0123456789xyz", "Token%20abc%200123456789xyz",
                 r"Token\u0020abc+0123456789xyz"):  # fmt: skip
        assert mask.sub("***", f"[{form}]") == "[***]", form


def test_a_short_secret_is_still_masked_as_a_whole_token_only():
    mask = secret_pattern(["abcdefgh12"])  # under LONG_SECRET: a token of its own only
    assert mask is not None
    assert mask.sub("***", r'"\u0061bcdefgh12"') == '"***"'
    assert mask.sub("***", "x%61bcdefgh12 abcdefgh12z") == "x%61bcdefgh12 abcdefgh12z"
    # what merely looks like an escape is left as it stands
    plain = r"exceeded %2F \/ \u002b + quota"
    assert mask.sub("***", plain) == plain


def test_the_longer_of_two_secrets_is_masked_whole():
    short, long = "sk-test/abc", KEY  # one a prefix of the other
    mask = secret_pattern([short, long])
    assert mask is not None
    assert mask.sub("***", FORMS["mixed"]) == "***"
    assert mask.sub("***", r"sk-test\/abc") == "***"


# --- answers that echo the key, read from a batch's results ------------------------------------
def _answers(reasoning_text: str, text: str) -> dict[str, dict]:
    """A 200 answer of each protocol, with this text and reasoning."""
    return {
        "openai": {
            "model": "m",
            "choices": [
                {
                    "message": {"content": text, "reasoning_content": reasoning_text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        },
        "anthropic": {
            "model": "m",
            "content": [
                {"type": "thinking", "thinking": reasoning_text},
                {"type": "text", "text": text},
            ],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
        "gemini": {
            "modelVersion": "m",
            "candidates": [
                {
                    "content": {
                        "parts": [{"text": reasoning_text, "thought": True}, {"text": text}]
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
        },
    }


ECHO_TEXT = f'{{"value": 3}} your key: {KEY} or {FORMS["url"]}'
ECHO_REASONING = f"the header said Bearer {FORMS['json letter']}, that is {KEY}"


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
def test_a_batch_answer_that_echoes_the_key_is_masked(protocol, monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    model = ModelConfig(provider=protocol, name="m", base_url="http://127.0.0.1:9", api_key_env=ENV)
    api = batch_api(make_provider(model, LimitConfig()))
    item = api.answered("t-1", 200, _answers(ECHO_REASONING, ECHO_TEXT)[protocol])
    assert item.error is None and item.completion is not None
    done = item.completion
    assert done.text == '{"value": 3} your key: *** or ***'
    assert done.reasoning == "the header said Bearer ***, that is ***"


def test_a_served_model_name_that_echoes_the_key_is_masked(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    model = ModelConfig(provider="openai", name="m", base_url="http://127.0.0.1:9", api_key_env=ENV)
    body = _answers("r", "t")["openai"] | {"model": f"m-{KEY}", "system_fingerprint": KEY}
    done = batch_api(make_provider(model, LimitConfig())).answered("t-1", 200, body).completion
    assert done is not None and (done.served_model, done.system_fingerprint) == ("m-***", "***")


def test_a_refusal_that_quotes_the_key_is_masked(monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    model = ModelConfig(provider="openai", name="m", base_url="http://127.0.0.1:9", api_key_env=ENV)
    api = batch_api(make_provider(model, LimitConfig()))
    body = _answers("", ECHO_TEXT)["openai"]
    body["choices"][0]["finish_reason"] = "content_filter"
    item = api.answered("t-1", 200, body)
    assert isinstance(item.error, Refused)
    assert "***" in str(item.error) and not leaked(str(item.error))


# --- a whole run against a server that echoes the key ------------------------------------------


def _run(tmp_path, provider: str, handler):
    server = Loopback(handler)
    url = server.url + ("/v1" if provider == "openai" else "")
    try:
        done = cli("run", str(_config(tmp_path, provider, url)), cwd=tmp_path)
    finally:
        server.stop()
    results = tmp_path / "runs/u/default/results.ndjson"
    return done, done.stdout + done.stderr, results.read_text() if results.exists() else ""


def test_a_401_that_echoes_the_key_escaped_shows_it_nowhere(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    planted = ["json slash", "json upper hex", "json letter", "url lower hex", "mixed"]

    async def echo(request: web.Request) -> web.Response:
        # the headers written back as a server's JSON encoder may write them: `/` as `\/`, and
        # every other form of the key after it, all within what a message quotes
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        echoed = " ".join(FORMS[name] for name in planted)
        body = '{"error": {"message": "invalid key", "authorization": "Bearer ' + echoed + '"}}'
        return web.Response(status=401, text=body, content_type="application/json")

    done, said, results = _run(tmp_path, "openai", echo)
    assert done.returncode == 1, said
    assert "401 from" in " ".join(said.split()) and "***" in said, said
    assert not leaked(said), said
    assert "0123456789" not in flat(said)
    lines = [orjson.loads(x) for x in results.splitlines()]
    assert lines and all(x["status"] == "failed" for x in lines)
    assert all("***" in x["error"] for x in lines), lines
    assert not leaked(results) and "0123456789" not in results, results


def _echoing(protocol: str):
    answer = orjson.dumps(_answers(ECHO_REASONING, ECHO_TEXT)[protocol])

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=answer, content_type="application/json")

    return handler


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
def test_an_answer_that_echoes_the_key_is_stored_masked(tmp_path, monkeypatch, protocol):
    monkeypatch.setenv(ENV, KEY)
    done, said, results = _run(tmp_path, protocol, _echoing(protocol))
    assert done.returncode == 0, said
    lines = [orjson.loads(x) for x in results.splitlines()]
    assert lines, said
    for line in lines:
        response = line["response"]
        assert response["raw"] == '{"value": 3} your key: *** or ***', response
        assert response["reasoning"] == "the header said Bearer ***, that is ***", response
    assert not leaked(results) and "0123456789" not in results, results
    assert not leaked(said), said

"""Reasoning models over HTTP, against the emulator answering as their APIs do: the issue's
three-model campaign end to end, its traces audited; an unknown reasoning model switched to
max_completion_tokens without a failed task; Gemini's thought summaries."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT, cli, openai_config, run_quietly, write_config

KEYS = {"OPENAI_API_KEY": "k-o", "ANTHROPIC_API_KEY": "k-a", "DEEPSEEK_API_KEY": "k-d"}


def _records(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


@pytest.fixture
def keys(monkeypatch):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def test_three_reasoning_models_run_keep_their_traces_and_are_audited(tmp_path, emulator, keys):
    server = emulator()
    text = (ROOT / "configs" / "reasoning-emulated.toml").read_text()
    config = tmp_path / "reasoning.toml"
    config.write_text(text.replace("http://127.0.0.1:8765", server.url))
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    records = _records(tmp_path / "runs" / "reasoning-emulated" / "default")
    by_model: dict[str, list[dict]] = {}
    for r in records:
        by_model.setdefault(r["model"]["name"], []).append(r)
    assert set(by_model) == {"o4-mini", "claude-sonnet-4-5", "deepseek-reasoner"}
    assert all(r["status"] in ("ok", "parse_error") for r in records)  # no failed task
    assert sum(r["status"] == "ok" for r in records) == len(records)

    o4 = by_model["o4-mini"]
    assert all("reasoning" not in r["response"] for r in o4)  # OpenAI shows none
    assert all(r["usage"]["reasoning_tokens"] > 0 for r in o4)
    assert all(r["usage"]["completion_tokens"] > r["usage"]["reasoning_tokens"] for r in o4)
    assert all(r["model"]["maxTokensParam"] == "max_completion_tokens" for r in o4)
    assert all(r["model"]["reasoningEffort"] == "low" for r in o4)
    sent = [b for b in server.log.bodies if b.get("model") == "o4-mini"]
    assert sent and all(
        b["max_completion_tokens"] == 2048
        and b["reasoning_effort"] == "low"
        and "max_tokens" not in b
        and "temperature" not in b
        for b in sent
    )
    for name in ("claude-sonnet-4-5", "deepseek-reasoner"):
        for r in by_model[name]:
            trace = r["response"]["reasoning"]
            assert len([line for line in trace.splitlines() if line.strip()]) >= 4
            assert trace not in r["response"]["raw"]  # the answer is the answer alone
    claude = [b for b in server.log.bodies if b.get("model") == "claude-sonnet-4-5"]
    assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 1024} for b in claude)
    assert all(r["model"]["thinkingBudget"] == 1024 for r in by_model["claude-sonnet-4-5"])
    for r in by_model["claude-sonnet-4-5"]:  # counted apart, billed inside completion tokens
        assert 0 < r["usage"]["reasoning_tokens"] < r["usage"]["completion_tokens"]

    audited = cli("audit", "runs/reasoning-emulated/default", "--judge", "simulated", cwd=tmp_path)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    (audit_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("audit-")]
    audits = _records(audit_dir / "default")
    shown = {
        r["taskId"]: r["response"]["reasoning"] for r in records if "reasoning" in r["response"]
    }
    assert (
        len(audits)
        == len(shown)
        == len(by_model["claude-sonnet-4-5"]) + len(by_model["deepseek-reasoner"])
    )
    manifest = orjson.loads((audit_dir / "default" / "manifest.json").read_bytes())
    items = {
        v["id"]: v["item"]
        for job in (
            manifest["jobs"].values() if isinstance(manifest["jobs"], dict) else manifest["jobs"]
        )
        for e in job["experiments"]
        for c in e["conditions"]
        for v in c["variants"]
    }
    assert set(items) == set(shown)
    assert all(items[t]["trace"] == shown[t] for t in shown)  # the models' own reasoning
    assert all(i["source_trace"] == "reasoning" for i in items.values())
    assert {i["source_model"] for i in items.values()} == {
        "anthropic/claude-sonnet-4-5",
        "openai/deepseek-reasoner",
    }


def test_an_unknown_reasoning_model_is_switched_once_and_no_task_fails(tmp_path, emulator):
    server = emulator(reasoning_models=frozenset({"house-7"}))
    config = openai_config(
        tmp_path, server.base_url("openai"), samples=2, limits="max_in_flight = 4"
    )
    config.write_text(
        config.read_text()
        .replace('name = "fake-model"', 'name = "house-7"')
        .replace("temperature = 0.7\n", "")
    )
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert said.count("the server refused max_tokens") == 1
    records = _records(tmp_path / "runs" / "t" / "r1")
    assert len(records) == 24 and all(r["status"] == "ok" for r in records)
    assert all(r["attempts"] == 1 for r in records)  # the switch is no retry
    assert all(r["model"]["maxTokensParam"] == "max_completion_tokens" for r in records)
    refused = server.log.statuses[("openai", 400)]
    assert 1 <= refused <= 4  # at most the calls in flight when the first 400 came back
    assert sum("max_tokens" in b for b in server.log.bodies) == refused


def test_a_temperature_on_an_unknown_reasoning_model_stops_it_with_the_fix(tmp_path, emulator):
    server = emulator(reasoning_models=frozenset({"house-7"}))
    config = openai_config(tmp_path, server.base_url("openai"), samples=2)
    config.write_text(config.read_text().replace('name = "fake-model"', 'name = "house-7"'))
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 1
    said = " ".join((done.stdout + done.stderr).split())
    assert "set reasoning = true on the model and remove temperature" in said


def test_gemini_thought_summaries_come_back_apart_and_billed(tmp_path, emulator):
    server = emulator()
    config = write_config(
        tmp_path,
        f"""
        name = "g"
        jobs = ["paired"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "gemini"
        name = "gemini-2.5-flash"
        base_url = "{server.base_url("gemini")}"
        thinking_budget = 256
        max_tokens = 1024
        """,
    )
    outcome = run_quietly(config)
    assert outcome.exit_code == 0
    records = _records(tmp_path / "runs" / "g" / "default")
    for r in records:
        assert r["status"] == "ok" and r["response"]["reasoning"]
        assert r["usage"]["reasoning_tokens"] > 0
    sent = server.log.bodies[0]["generationConfig"]["thinkingConfig"]
    assert sent == {"thinkingBudget": 256, "includeThoughts": True}


def test_azure_key_header_and_extra_body_reach_the_server(tmp_path, emulator, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-key-0123456789")
    server = emulator(keys=frozenset({"az-key-0123456789"}))
    config = write_config(
        tmp_path,
        f"""
        name = "az"
        jobs = ["paired"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        preset = "azure"
        base_url = "{server.base_url("openai")}"
        name = "my-o4-mini-deployment"
        reasoning = true
        max_tokens = 1024
        extra_body = {{provider = {{order = ["east"]}}}}
        """,
    )
    assert run_quietly(config).exit_code == 0  # the emulator takes Azure's api-key header
    assert all(b["provider"] == {"order": ["east"]} for b in server.log.bodies)
    assert all("max_completion_tokens" in b for b in server.log.bodies)
    manifest = (tmp_path / "runs" / "az" / "default" / "manifest.json").read_text()
    assert '"extra_body"' in manifest and "az-key-0123456789" not in manifest


def test_headers_from_the_environment_are_sent_and_never_written(tmp_path, monkeypatch):
    """A loopback server that answers as OpenAI's and keeps the headers it was sent."""
    import asyncio
    import threading

    from aiohttp import web

    seen: list[dict[str, str]] = []

    async def chat(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response(
            {
                "model": "m",
                "choices": [{"message": {"content": '{"value": 3}'}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3},
            }
        )

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    threading.Thread(target=loop.run_forever, daemon=True).start()
    monkeypatch.setenv("APP_TITLE", "title-secret-77")
    monkeypatch.setenv("AZ_KEY", "az-key-secret-88")
    try:
        config = write_config(
            tmp_path,
            f"""
            name = "h"
            jobs = ["paired"]
            samples = 1
            output_dir = "{tmp_path / "runs"}"
            [[models]]
            provider = "openai"
            name = "m"
            base_url = "http://127.0.0.1:{port}/v1"
            headers_env = {{"X-Title" = "APP_TITLE"}}
            api_key_env = "AZ_KEY"
            api_key_header = "api-key"
            """,
        )
        done = cli("run", str(config), cwd=tmp_path)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
    assert done.returncode == 0, done.stderr
    assert seen and all(h.get("X-Title") == "title-secret-77" for h in seen)
    assert all(h.get("api-key") == "az-key-secret-88" and "Authorization" not in h for h in seen)
    written = b"".join(p.read_bytes() for p in (tmp_path / "runs").rglob("*") if p.is_file())
    for secret in ("title-secret-77", "az-key-secret-88"):
        assert secret.encode() not in written and secret not in done.stdout + done.stderr

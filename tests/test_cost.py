"""Presets, prices, plan estimates, and budgets that refuse or stop a run."""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.estimate import durations, estimate
from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from tests.conftest import write_config


def _config(tmp_path, url: str, *, samples=5, model_extra="", top="", limits="max_in_flight = 4"):
    return write_config(
        tmp_path,
        f"""
        name = "cost"
        jobs = ["paired"]
        samples = {samples}
        output_dir = "{tmp_path / "runs"}"
        {top}
        [[models]]
        preset = "vllm"
        name = "gpt-4o-mini"
        base_url = "{url}"
        max_tokens = 40
        {model_extra}
        [limits.vllm]                   # a preset is its own limit key
        {limits}
        """,
    )


def test_presets_fill_in_the_protocol_and_prices_come_from_the_table(tmp_path):
    campaign = load_campaign(_config(tmp_path, "http://127.0.0.1:9/v1"))
    model = campaign.config.models[0]
    assert (
        model.provider == "openai" and model.base_url == "http://127.0.0.1:9/v1"
    )  # own value wins
    assert (model.price.input, model.price.output) == (0.15, 0.60)
    groq = write_config(
        tmp_path,
        'name = "g"\njobs = ["paired"]\n[[models]]\npreset = "groq"\nname = "x"',
        name="groq.toml",
    )
    m = load_campaign(groq).config.models[0]
    assert (m.provider, m.base_url, m.api_key_env) == (
        "openai",
        "https://api.groq.com/openai/v1",
        "GROQ_API_KEY",
    )
    assert m.price is None


def test_plan_estimates_tokens_cost_and_duration(tmp_path):
    cfg = _config(tmp_path, "http://127.0.0.1:9/v1", samples=10, limits="rpm = 60\ntpm = 100000")
    plan = Plan(load_campaign(cfg))
    [e] = estimate(plan).values()
    prompt_tokens = sum(c.samples * (c.est_tokens - 40) for c in plan.cells)
    assert (e.calls, e.input_tokens, e.output_max, e.output_typical) == (
        120,
        prompt_tokens,
        120 * 40,
        120 * 16,
    )
    assert e.cost == pytest.approx((prompt_tokens * 0.15 + 120 * 16 * 0.60) / 1e6)
    assert e.cost_max == pytest.approx((prompt_tokens * 0.15 + 120 * 40 * 0.60) / 1e6)
    assert durations(plan, {"k": e})["vllm"] == pytest.approx(
        max(120, (prompt_tokens + 1920) / 100000 * 60)
    )
    out = " ".join(CliRunner().invoke(app, ["plan", str(cfg)]).output.split())
    assert "estimates per model" in out and "2.0 min at its configured rate" in out


def test_a_plan_over_budget_is_refused_before_anything_runs(tmp_path, emulator):
    server = emulator()
    cfg = _config(
        tmp_path, server.base_url("openai"), model_extra="price = {input = 100000, output = 0}"
    )
    result = CliRunner().invoke(app, ["run", str(cfg), "--budget", "1"])
    assert result.exit_code == 2 and "over the budget" in " ".join(result.output.split())
    assert not server.log.arrivals
    assert not (tmp_path / "runs").exists()  # so lowering samples afterwards is no "changed plan"


def test_a_budget_needs_a_price_for_every_paid_model(tmp_path, emulator):
    server = emulator()
    cfg = (
        _config(tmp_path, server.base_url("openai"))
        .read_text()
        .replace('name = "gpt-4o-mini"', 'name = "unpriced"')
    )
    path = write_config(tmp_path, cfg, name="unpriced.toml")
    result = CliRunner().invoke(app, ["run", str(path), "--budget", "5"])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "has no price" in flat and "models.price" in flat
    assert not server.log.arrivals


def test_the_run_stops_when_its_spend_reaches_the_budget_and_resumes(tmp_path, emulator):
    # The server's tokenizer counts three times what the estimate assumes, as real ones may:
    # the plan fits the budget, the spend does not.
    server = emulator(latency_s=0.01, token_ratio=3.0)
    cfg = _config(
        tmp_path,
        server.base_url("openai"),
        samples=10,
        model_extra="price = {input = 100, output = 0}",
        limits="max_in_flight = 2",
    )
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(cfg), "--budget", "1.3"])
    assert first.exit_code == 3, first.output
    results = tmp_path / "runs" / "cost" / "default" / "results.ndjson"
    records = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    spent = sum(r["costUsd"] for r in records)
    assert 1.3 <= spent < 1.3 + 0.05 and len(records) < 120
    assert "budget reached" in " ".join(first.output.split())
    refused = runner.invoke(app, ["run", str(cfg), "--budget", "1.4"])  # the rest would cost more
    assert refused.exit_code == 2
    done = runner.invoke(app, ["run", str(cfg), "--budget", "10"])
    assert done.exit_code == 0, done.output
    final = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    assert len(final) == 120 == len({r["taskId"] for r in final})
    status = " ".join(runner.invoke(app, ["status", str(results.parent)]).output.split())
    assert f"spent ${sum(r['costUsd'] for r in final):,.4f}" in status

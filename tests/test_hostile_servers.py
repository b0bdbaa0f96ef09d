"""Servers that misbehave in ways a retry cannot fix: absurd hints, quotas gone for the day,
requests too long, hosts that do not exist, thinking that eats the answer, keys echoed back.

Each error has a scope: a hint is bounded, a task's own problem is that task's final record, and
a model's problem stops that model, with a message, after a few attempts at most."""

from __future__ import annotations

import socket
from collections import Counter
from pathlib import Path

import orjson
import pytest

from orchestrator.emulator.server import Faults
from tests.conftest import run_quietly, write_config

KEYS = {
    "openai": "sk-proj-vxfrVELFt0OOhc5NqeY3sGjF6mU7tiMUzre6qc8m",  # 48 characters, as real ones
    "anthropic": "sk-ant-api03-Oe3ugVJjYjpECGUgJ3PAnug96csbYK2tzRT",
    "gemini": "AIzaSyycTh1U8AJPflfqJDrOtchCyRT2COpchwSo3VGo4xgZ",
}
FAST = "max_in_flight = 2\nmax_attempts = 3\nbackoff_base_s = 0.01\nbackoff_max_s = 0.02"
PER_MODEL = 12  # tasks of paired at samples = 1


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    for provider, key in KEYS.items():
        monkeypatch.setenv(f"HOSTILE_{provider.upper()}_KEY", key)


def campaign(
    tmp_path: Path,
    urls: dict[str, str],
    *,
    limits: str = FAST,
    model: str = "",
    samples: int = 1,
    max_tokens: int = 24,
) -> Path:
    """One model per provider in `urls`, each on its own limit key."""
    models = "".join(
        f"""
[[models]]
provider = "{p}"
name = "{p}-test"
base_url = "{url}"
api_key_env = "HOSTILE_{p.upper()}_KEY"
max_tokens = {max_tokens}
{model}
[limits.{p}]
{limits}
"""
        for p, url in urls.items()
    )
    return write_config(
        tmp_path,
        f"""
name = "hostile"
jobs = ["paired"]
samples = {samples}
output_dir = "{tmp_path / "runs"}"
{models}""",
    )


def everywhere(server) -> dict[str, str]:
    return {p: server.base_url(p) for p in ("openai", "anthropic", "gemini")}


def records(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


def by_provider(outcome) -> Counter:
    return Counter((r["model"]["provider"], r["status"]) for r in records(outcome.run_dir))


def fatal_of(outcome, needle: str) -> str:
    """The one stop message that names `needle` (a model label or a URL)."""
    [message] = [m for m in outcome.state.fatal.values() if needle in m]
    return message


# --- hints ---------------------------------------------------------------------------------


@pytest.mark.parametrize("hint", ["inf", "nan", "-1", "1e400", "soon"])
def test_an_absurd_retry_after_is_ignored_and_every_task_finishes(tmp_path, emulator, hint):
    server = emulator(Faults(rate_limited=0.3, retry_after=hint), seed=2)
    outcome = run_quietly(
        campaign(
            tmp_path,
            everywhere(server),
            limits="max_in_flight = 2\nmax_attempts = 20\nbackoff_base_s = 0.01\n"
            "backoff_max_s = 0.02",
        )
    )
    assert server.log.served["rate_limited"] > 0
    assert by_provider(outcome) == {(p, "ok"): PER_MODEL for p in ("openai", "anthropic", "gemini")}
    assert outcome.exit_code == 0 and not outcome.state.fatal


def test_garbage_limit_headers_are_ignored_and_a_huge_reset_pauses_for_max_pause_s(
    tmp_path, emulator
):
    server = emulator(
        Faults(rate_limited=0.2),
        seed=3,
        headers={
            "x-ratelimit-limit-requests": "1e400",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1e300",
            "x-ratelimit-limit-tokens": "lots",
            "x-ratelimit-remaining-tokens": "nan",
            "x-ratelimit-reset-tokens": "-3s",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "inf",
            "anthropic-ratelimit-tokens-limit": "1e400",
            "anthropic-ratelimit-tokens-remaining": "-1",
            "retry-after-ms": "soon",
        },
    )
    outcome = run_quietly(
        campaign(
            tmp_path,
            everywhere(server),
            limits=FAST.replace("max_attempts = 3", "max_attempts = 20") + "\nmax_pause_s = 0.05",
        )
    )
    assert server.log.served["rate_limited"] > 0
    assert by_provider(outcome) == {(p, "ok"): PER_MODEL for p in ("openai", "anthropic", "gemini")}
    assert outcome.exit_code == 0


def test_a_retry_after_beyond_max_pause_s_stops_the_model_at_once(tmp_path, emulator):
    server = emulator(Faults(rate_limited=1.0, retry_after="86400"))
    outcome = run_quietly(
        campaign(tmp_path, everywhere(server), limits=FAST + "\nmax_pause_s = 30")
    )
    for provider in ("openai", "anthropic", "gemini"):
        message = fatal_of(outcome, f"{provider}/{provider}-test")
        assert "86,400 s, more than max_pause_s = 30" in message and "run again later" in message
    recs = records(outcome.run_dir)
    assert {r["status"] for r in recs} == {"failed"} and all(r["attempts"] == 1 for r in recs)
    assert len(recs) == len(server.log.arrivals) <= 3 * 2  # at most one call per worker
    assert outcome.exit_code == 1


def test_a_quota_used_up_stops_each_model_with_the_fix(tmp_path, emulator):
    server = emulator(Faults(quota=1.0))
    outcome = run_quietly(campaign(tmp_path, everywhere(server)))
    assert "insufficient_quota" in fatal_of(outcome, "openai/openai-test")
    assert "RESOURCE_EXHAUSTED" in fatal_of(
        outcome, "gemini/gemini-test"
    )  # though it asks for 43 s
    assert "credit balance is too low" in fatal_of(outcome, "anthropic/anthropic-test")
    for provider in ("openai", "anthropic", "gemini"):
        message = fatal_of(outcome, f"{provider}/{provider}-test")
        assert f"quota of the key in HOSTILE_{provider.upper()}_KEY is used up" in message
    recs = records(outcome.run_dir)
    assert all(r["attempts"] == 1 for r in recs) and len(recs) == len(server.log.arrivals) <= 3 * 2
    assert outcome.exit_code == 1


# --- errors by scope -----------------------------------------------------------------------


def prompt_tokens_median(server) -> int:
    from orchestrator.emulator.answers import tokens
    from orchestrator.plan import Plan
    from orchestrator.session import build_campaign
    from orchestrator.spec.campaign import CampaignConfig

    cfg = CampaignConfig(
        name="p",
        jobs=["paired"],
        samples=1,
        models=[{"provider": "gemini", "name": "g", "base_url": server.url}],
    )
    sizes = sorted(
        tokens("".join(m["content"] for m in t.cell.messages))
        for t in Plan(build_campaign(cfg, None)).tasks()
    )
    return sizes[len(sizes) // 2]


def test_a_prompt_over_the_context_length_is_that_tasks_final_record(tmp_path, emulator):
    from typer.testing import CliRunner

    from orchestrator.cli import app

    server = emulator()
    server.config.context_tokens = prompt_tokens_median(server)
    cfg = campaign(tmp_path, everywhere(server))
    outcome = run_quietly(cfg)
    counts = by_provider(outcome)
    too_long = server.log.served["too_long"]
    assert 0 < too_long < 3 * PER_MODEL
    assert sum(n for (_, status), n in counts.items() if status == "too_long") == too_long
    for provider in ("openai", "anthropic", "gemini"):  # each in its own words, none stopped
        assert counts[(provider, "too_long")] > 0
        assert counts[(provider, "too_long")] + counts[(provider, "ok")] == PER_MODEL
    assert not outcome.state.fatal and outcome.exit_code == 0
    assert all(
        r["attempts"] == 1 and "400 from" in r["error"]
        for r in records(outcome.run_dir)
        if r["status"] == "too_long"
    )

    calls = len(server.log.arrivals)
    again = run_quietly(cfg)  # final records: nothing to call on resume
    assert again.already_complete and len(server.log.arrivals) == calls

    run_dir = outcome.run_dir
    runner = CliRunner()
    status = runner.invoke(app, ["status", str(run_dir)], terminal_width=200)
    assert status.exit_code == 0 and "complete" in status.output and "too_long" in status.output
    assert runner.invoke(app, ["analyze", str(run_dir)]).exit_code == 0
    summary = orjson.loads((run_dir / "summary.json").read_bytes())["effects"]
    answered = sum(row["n_records_0"] + row["n_records_1"] for row in summary)
    assert answered == 3 * PER_MODEL - too_long  # rejected requests are no answers
    assert any("unfinished" in flag for row in summary for flag in row["flags"])
    out = tmp_path / "export"
    assert runner.invoke(app, ["export", str(run_dir), "--out", str(out)]).exit_code == 0
    exported = sum(len(p.read_bytes().splitlines()) for p in out.rglob("*.ndjson"))
    assert exported == 3 * PER_MODEL - too_long


@pytest.mark.parametrize("where", ["closed-port", "no-such-host"])
def test_a_server_that_cannot_be_reached_stops_its_model_after_a_few_attempts(
    tmp_path, emulator, where
):
    if where == "closed-port":
        with socket.socket() as s:  # a port nothing listens on: every connection is refused
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    else:
        url = "http://no-such-host.invalid/v1"
    server = emulator()
    outcome = run_quietly(campaign(tmp_path, {"openai": url, "gemini": server.base_url("gemini")}))
    counts = by_provider(outcome)
    assert counts[("gemini", "ok")] == PER_MODEL  # the other model is not held up
    message = fatal_of(outcome, url)
    assert message.startswith(f"cannot connect to {url}") and "check base_url" in message
    failed = [r for r in records(outcome.run_dir) if r["model"]["provider"] == "openai"]
    assert 1 <= len(failed) <= 2 and {r["status"] for r in failed} == {"failed"}  # one per worker
    assert all(r["attempts"] == 3 for r in failed)
    assert outcome.exit_code == 1


# --- Gemini ---------------------------------------------------------------------------------


def test_thinking_counts_as_output_in_usage_cost_and_budget(tmp_path, emulator):
    server = emulator(thoughts_tokens=30)
    outcome = run_quietly(
        campaign(
            tmp_path,
            {"gemini": server.base_url("gemini")},
            max_tokens=64,
            model="price = {input = 1.0, output = 10.0}",
        )
    )
    recs = records(outcome.run_dir)
    assert {r["status"] for r in recs} == {"ok"} and len(recs) == PER_MODEL
    for r in recs:
        answer_tokens = max(1, (len(r["response"]["raw"]) + 3) // 4)
        assert r["usage"]["completion_tokens"] == answer_tokens + 30
        assert r["costUsd"] == pytest.approx(
            (r["usage"]["prompt_tokens"] * 1.0 + r["usage"]["completion_tokens"] * 10.0) / 1e6
        )
    assert outcome.state.spend == pytest.approx(sum(r["costUsd"] for r in recs))


@pytest.mark.slow
def test_thinking_counts_in_token_pacing(tmp_path, emulator):
    server = emulator(thoughts_tokens=40, tpm=1500, period_s=1.0)
    outcome = run_quietly(
        campaign(
            tmp_path,
            {"gemini": server.base_url("gemini")},
            samples=3,
            max_tokens=64,
            limits="tpm = 1500\nperiod_s = 1.0\nmax_in_flight = 8\nmax_attempts = 20",
        )
    )
    assert by_provider(outcome) == {("gemini", "ok"): 3 * PER_MODEL}
    assert server.log.statuses[("gemini", 429)] == 0


def test_a_candidate_without_parts_is_a_final_record_with_its_finish_reason(tmp_path, emulator):
    server = emulator(thoughts_tokens=64)  # thinking uses all of maxOutputTokens
    outcome = run_quietly(
        campaign(
            tmp_path,
            {"gemini": server.base_url("gemini")},
            max_tokens=64,
            model="price = {input = 1.0, output = 10.0}",
        )
    )
    recs = records(outcome.run_dir)
    assert len(recs) == PER_MODEL == len(server.log.arrivals)  # one call each: not retried
    for r in recs:
        assert r["status"] == "parse_error" and r["attempts"] == 1 and r["response"]["raw"] == ""
        assert r["error"].endswith("(finish reason MAX_TOKENS)")
        assert r["usage"]["completion_tokens"] == 64  # billed, once
        assert r["costUsd"] == pytest.approx((r["usage"]["prompt_tokens"] + 640) / 1e6)
    assert outcome.exit_code == 0


# --- secrets --------------------------------------------------------------------------------


@pytest.mark.slow
def test_keys_echoed_in_error_bodies_never_reach_a_file_or_a_message(tmp_path, emulator):
    """Error bodies quote the key where a 300-character excerpt cuts it in two: scrubbing after
    cutting would let the first half through."""
    from typer.testing import CliRunner

    from orchestrator.cli import app

    server = emulator(
        Faults(server_error=0.3, rate_limited=0.1),
        echo_key=True,
        seed=4,
        keys=frozenset({KEYS["openai"], KEYS["gemini"]}),
    )  # anthropic's is refused
    cfg = campaign(tmp_path, everywhere(server), samples=2)
    runner = CliRunner()
    outputs = [runner.invoke(app, ["run", str(cfg)]).output]
    run_dir = tmp_path / "runs" / "hostile" / "default"
    for command in (["status"], ["analyze"], ["report"], ["export"]):
        outputs.append(runner.invoke(app, [*command, str(run_dir)]).output)
    assert server.log.served["server_error"] and server.log.statuses[("anthropic", 401)]
    errors = [r["error"] for r in records(run_dir) if r["error"]]
    assert any("sent key=" in e for e in errors)  # the echo reached the messages, scrubbed
    written = [p for p in run_dir.rglob("*") if p.is_file()]
    for key in KEYS.values():
        pieces = {key[i : i + 10] for i in range(len(key) - 9)}  # any 10 characters of a key
        for text in [*(p.read_bytes().decode("utf-8", "replace") for p in written), *outputs]:
            assert not any(piece in text for piece in pieces), "a piece of a key leaked"

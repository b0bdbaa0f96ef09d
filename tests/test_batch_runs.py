"""Batch mode end to end against the emulator's batch APIs: the records, the passes that requeue
failed and expired items, --no-wait, and the same analysis as online."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import anyio
import orjson
import pytest
from polars.testing import assert_frame_equal
from rich.console import Console

from orchestrator.analysis.summary import analyze
from orchestrator.batch.api import BatchLimits
from orchestrator.batch.journal import Journal
from orchestrator.batch.openai import OpenAIBatch
from orchestrator.batch.runner import PASSES
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.plan import Plan
from orchestrator.providers.errors import Transient
from orchestrator.providers.simulated import SimulatedProvider
from orchestrator.session import load_campaign, run_campaign
from orchestrator.spec.campaign import ModelConfig
from tests.conftest import cli, write_config

NAMES = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-3-5-haiku-latest",
    "gemini": "gemini-1.5-flash",
}


def batch_config(
    tmp_path: Path,
    server,
    protocol: str = "openai",
    *,
    batch: bool = True,
    samples: int = 4,
    run_id: str = "r1",
    seed: str = "seed = 11",
) -> Path:
    return write_config(
        tmp_path,
        f"""
        name = "b"
        jobs = ["paired"]
        samples = {samples}
        seed = 5
        run_id = "{run_id}"
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "{protocol}"
        name = "{NAMES[protocol]}"
        base_url = "{server.base_url(protocol)}"
        temperature = 0.7
        {seed if protocol != "anthropic" else ""}
        batch = {str(batch).lower()}
        [limits.{protocol}]
        batch_poll_s = 0.05
        """,
        name=f"{protocol}-{run_id}.toml",
    )


def run(cfg: Path, **options):
    with open(os.devnull, "w") as sink:
        return run_campaign(load_campaign(cfg), Console(file=sink), handle_signals=False, **options)


def records(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
def test_a_batch_run_writes_every_task_once_at_the_batch_price(tmp_path, emulator, protocol):
    server = emulator()
    cfg = batch_config(tmp_path, server, protocol)
    outcome = run(cfg)
    assert outcome.exit_code == 0 and outcome.in_flight == 0
    recs = records(outcome.run_dir)
    expected = {t.task_id for t in Plan(load_campaign(cfg)).tasks()}
    assert Counter(r["taskId"] for r in recs) == Counter(expected)  # each once
    assert {r["status"] for r in recs} == {"ok"}
    assert server.log.batches[protocol] == 1 and not server.log.arrivals  # no online call
    assert max(server.log.batch_items.values()) == 1
    (batch_id,) = {r["batchId"] for r in recs}
    assert batch_id == Journal(outcome.run_dir).batches.popitem()[1].batch_id
    assert not list((outcome.run_dir / "batches").iterdir())  # inputs of closed batches: gone
    # priced at half the online price of configs/prices.toml ([batch_discount])
    model = load_campaign(cfg).config.models[0]
    for r in recs[:5]:
        usage = r["usage"]
        online = model.price.cost(usage["prompt_tokens"], usage["completion_tokens"])
        assert r["costUsd"] == pytest.approx(online / 2, rel=1e-12)


def _simulated_respondent(cfg: Path):
    """The simulated respondent behind the emulator: each request body (messages and seed) is
    answered as the in-process simulated provider answers its task."""
    campaign = load_campaign(cfg)
    model = campaign.config.models[0]
    from orchestrator.providers.registry import make_provider

    online = make_provider(model, campaign.config.limit_for(model.limit_key))
    simulated = SimulatedProvider(
        ModelConfig(
            provider="simulated",
            name="sim",
            simulate={
                "effects": {
                    "escalation-past-investment": {
                        "conditions": [{"shares": {"Continue": 0.8}}, {"shares": {"Continue": 0.3}}]
                    }
                }
            },
        )
    )
    answers = {}
    for task in Plan(campaign).tasks():
        body = orjson.loads(online.body(task))
        answers[orjson.dumps([body["messages"], body.get("seed")])] = anyio.run(
            simulated.complete, task
        ).text
    return lambda protocol, body: answers.get(orjson.dumps([body["messages"], body.get("seed")]))


def test_the_simulated_respondent_gives_the_same_analysis_online_and_in_batch(tmp_path, emulator):
    server = emulator()
    online_cfg = batch_config(tmp_path, server, batch=False, samples=30, run_id="online")
    batch_cfg = batch_config(tmp_path, server, batch=True, samples=30, run_id="batch")
    server.config.respondent = _simulated_respondent(online_cfg)
    online, batched = run(online_cfg), run(batch_cfg)
    assert online.exit_code == batched.exit_code == 0
    assert (
        len(server.log.arrivals) == Plan(load_campaign(online_cfg)).total
    )  # online: one call each
    assert server.log.batches["openai"] == 1
    by_task = {r["taskId"]: r["response"] for r in records(online.run_dir)}
    assert {r["taskId"]: r["response"] for r in records(batched.run_dir)} == by_task
    a, b = analyze(online.run_dir).tables, analyze(batched.run_dir).tables
    assert a.keys() == b.keys() and a
    for stem in a:  # the same records in another order: sums differ in their last bit only
        assert_frame_equal(a[stem], b[stem], check_exact=False, rel_tol=1e-12, abs_tol=1e-12)
    # and the planted effect is there to be seen (the respondent was really used)
    shares = [
        orjson.loads(r["response"]["raw"])["choice"]
        for r in records(batched.run_dir)
        if r["experimentSlug"] == "escalation-past-investment" and r["conditionIndex"] == 0
    ]
    assert shares.count("Continue") / len(shares) > 0.6


def _batches_in_order(run_dir: Path):
    return sorted(Journal(run_dir).batches.values(), key=lambda b: b.submitted_at)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_failed_and_expired_items_go_out_again_and_exactly_those(tmp_path, emulator, protocol):
    server = emulator()
    server.config.batch = BatchBehaviour(item_errors=0.3, expire=0.2)
    cfg = batch_config(tmp_path, server, protocol, samples=10)
    outcome = run(cfg)
    batches = _batches_in_order(outcome.run_dir)
    assert len(batches) == PASSES  # ~half fail each pass: three passes are used
    recs = records(outcome.run_dir)
    ok = {r["taskId"] for r in recs if r["status"] == "ok"}
    answered = Counter(r["batchId"] for r in recs if r["status"] == "ok")
    for before, after in zip(batches, batches[1:]):
        ok_before = {
            r["taskId"] for r in recs if r["status"] == "ok" and r["batchId"] == before.batch_id
        }
        assert set(after.tasks) == set(before.tasks) - ok_before  # exactly the missing ones
        assert before.requeued == len(after.tasks) and 0 < len(after.tasks) < len(before.tasks)
    assert all(answered[b.batch_id] for b in batches)
    failed = [r for r in recs if r["status"] == "failed"]  # still missing after the last pass
    assert {r["taskId"] for r in failed} == set(batches[-1].tasks) - ok
    assert all(r["error"].startswith("batch: ") for r in failed)
    assert len(ok) + len(failed) == Plan(load_campaign(cfg)).total
    assert max(server.log.batch_items.values()) <= PASSES
    assert outcome.exit_code == 1  # some failed: run again to retry them
    assert server.log.batches[protocol] == PASSES
    # the next run sends only those
    server.config.batch = BatchBehaviour()
    again = run(cfg)
    assert again.exit_code == 0
    assert set(_batches_in_order(outcome.run_dir)[-1].tasks) == {r["taskId"] for r in failed}


def test_no_wait_submits_and_a_later_run_collects(tmp_path, emulator):
    server = emulator()
    server.config.batch = BatchBehaviour(processing_s=2.0)
    cfg = batch_config(tmp_path, server)
    first = run(cfg, wait_for_batches=False)
    total = Plan(load_campaign(cfg)).total
    assert first.exit_code == 0 and first.in_flight == total
    assert not (first.run_dir / "results.ndjson").read_bytes()
    status = cli("status", str(first.run_dir), cwd=tmp_path)
    assert "1 batch(es) in flight" in status.stdout and f"{total:,} tasks pending" in status.stdout
    second = run(cfg)  # waits for it
    assert second.exit_code == 0 and second.in_flight == 0
    assert len(records(first.run_dir)) == total
    assert server.log.batches["openai"] == 1  # polled, not sent again


def test_a_model_switched_back_online_collects_its_batches_and_runs_the_rest_online(
    tmp_path, emulator, monkeypatch
):
    """Tasks in a batch in flight are never also called online (that would pay twice); the
    model's other tasks run online, and what its batch gives back runs online the next time."""
    server = emulator()
    server.config.batch = BatchBehaviour(processing_s=1.0, item_errors=0.5)
    cfg = batch_config(tmp_path, server, samples=4)
    monkeypatch.setattr(OpenAIBatch, "limits", BatchLimits(max_requests=20, max_bytes=2**27))
    sent = OpenAIBatch.submit

    async def once(self, *args):  # the first batch goes out, then the network fails
        if server.log.batches["openai"]:
            raise Transient("connection reset")
        return await sent(self, *args)

    monkeypatch.setattr(OpenAIBatch, "submit", once)
    first = run(cfg, wait_for_batches=False)
    assert first.exit_code == 1 and server.log.batches["openai"] == 1
    journal = Journal(first.run_dir)  # the second batch's creation is unconfirmed: never made
    in_batch = {t for b in journal.open_batches() if b.batch_id for t in b.tasks}
    total = Plan(load_campaign(cfg)).total
    assert len(in_batch) == 20 < total and len(journal.in_flight_tasks()) == 40
    outcome = run(batch_config(tmp_path, server, batch=False, samples=4))  # now online
    recs = records(outcome.run_dir)
    failed = {r["taskId"] for r in recs if r["status"] == "failed"}
    batched = {r["taskId"] for r in recs if r["batchId"]}
    assert batched == in_batch and failed and failed <= in_batch  # collected; some failed
    assert len(server.log.arrivals) == total - 20  # the rest online, none of the batch's
    assert outcome.exit_code == 1  # run again for the failed ones
    again = run(batch_config(tmp_path, server, batch=False, samples=4))
    assert again.exit_code == 0 and len(server.log.arrivals) == total - 20 + len(failed)
    assert server.log.batches["openai"] == 1
    assert len({r["taskId"] for r in records(outcome.run_dir) if r["status"] != "failed"}) == total


def test_batch_answers_feed_the_response_cache_and_cached_calls_are_not_batched(tmp_path, emulator):
    server = emulator()
    cache = f'cache = "{tmp_path / "responses.sqlite"}"'

    def cached(cfg: Path) -> Path:
        cfg.write_text(cache + "\n" + cfg.read_text())
        return cfg

    first = run(cached(batch_config(tmp_path, server, batch=True, run_id="paid")))
    assert first.exit_code == 0 and server.log.batches["openai"] == 1
    # an online run of the same calls: every answer is the batch's, no call made
    online = run(cached(batch_config(tmp_path, server, batch=False, run_id="again")))
    recs = records(online.run_dir)
    assert online.exit_code == 0 and not server.log.arrivals
    assert {r["cachedFrom"] for r in recs} == {"b/paid"} and {r["costUsd"] for r in recs} == {0.0}
    # and a batch run of them sends no batch
    third = run(cached(batch_config(tmp_path, server, batch=True, run_id="third")))
    assert third.exit_code == 0 and server.log.batches["openai"] == 1
    assert len(records(third.run_dir)) == Plan(load_campaign(batch_config(tmp_path, server))).total
    assert {r["batchId"] for r in records(third.run_dir)} == {None}


def test_over_long_prompts_in_a_batch_are_final_not_requeued(tmp_path, emulator):
    server = emulator()
    server.config.context_tokens = 100  # shorter than the benchmark's long prompts only
    cfg = batch_config(tmp_path, server)
    outcome = run(cfg)
    recs = records(outcome.run_dir)
    too_long = [r for r in recs if r["status"] == "too_long"]
    assert too_long and len(too_long) < len(recs)
    assert all("maximum context length" in r["error"] and r["batchId"] for r in too_long)
    assert server.log.batches["openai"] == 1  # not sent again: the outcome is final
    assert outcome.exit_code == 0 and len(recs) == Plan(load_campaign(cfg)).total


def test_an_answer_without_json_in_a_batch_goes_to_the_extractor(tmp_path, emulator):
    server = emulator()

    def respondent(protocol: str, body: dict) -> str | None:
        if "You extract answers" not in body["messages"][0]["content"]:
            return "I would go on with it, on balance."  # the batch's answers hold no JSON
        # the extractor states an answer in the format it is shown (extract.answer_format)
        asked = body["messages"][-1]["content"]
        if found := re.search(r'\{"(\w+)": "<one of: ([^|>]+?) [|>]', asked):
            return orjson.dumps({found[1]: found[2]}).decode()
        found = re.search(r'\{"(\w+)": <(integer (\d+)|number)', asked)
        return orjson.dumps({found[1]: int(found[3]) if found[3] else 1.5}).decode()

    server.config.respondent = respondent
    cfg = batch_config(tmp_path, server, samples=1)
    cfg.write_text(
        cfg.read_text()
        + f"""
[extractor]
provider = "openai"
name = "extractor-model"
base_url = "{server.base_url("openai")}"
limit = "extractor"
"""
    )
    outcome = run(cfg)
    recs = records(outcome.run_dir)
    assert outcome.exit_code == 0 and {r["status"] for r in recs} == {"ok"}
    assert {r["extractedBy"] for r in recs} == {"openai/extractor-model"}
    assert len(server.log.arrivals) == len(recs)  # one online call each: the extractor's
    assert all(r["response"]["raw"] == "I would go on with it, on balance." for r in recs)


def test_a_gemini_batch_that_expires_sends_all_its_tasks_again(tmp_path, emulator):
    """Gemini's batch expires whole, with no results: every task is pending again."""
    server = emulator()
    server.config.batch = BatchBehaviour(expire=0.5)
    cfg = batch_config(tmp_path, server, "gemini")
    outcome = run(cfg)
    batches = _batches_in_order(outcome.run_dir)
    assert len(batches) == PASSES and all(set(b.tasks) == set(batches[0].tasks) for b in batches)
    assert {r["status"] for r in records(outcome.run_dir)} == {"failed"} and outcome.exit_code == 1

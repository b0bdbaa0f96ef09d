"""Batches whose creation is unconfirmed (a create request that failed on the way back, a crash,
an API that fails at the next look): found, told apart, or waited out, never sent twice, never
taken for another model's."""

from __future__ import annotations

from collections import Counter

import anyio

from orchestrator.batch import runner
from orchestrator.batch.anthropic import AnthropicBatch
from orchestrator.batch.journal import Journal
from orchestrator.batch.openai import OpenAIBatch
from orchestrator.batch.wire import BatchClient
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.plan import Plan
from orchestrator.providers.errors import RateLimited, Transient
from orchestrator.session import load_campaign
from tests.test_batch_runs import batch_config, records, run

SONNET = """
[[models]]
provider = "anthropic"
name = "claude-3-5-sonnet-latest"
base_url = "{url}"
temperature = 0.7
batch = true
"""


def two_anthropic_models(tmp_path, server):
    cfg = batch_config(tmp_path, server, "anthropic")
    cfg.write_text(cfg.read_text() + SONNET.format(url=server.base_url("anthropic")))
    return cfg


def check_each_once(cfg, server) -> None:
    run_dir = tmp_path_run(cfg)
    recs = records(run_dir)
    expected = {t.task_id for t in Plan(load_campaign(cfg)).tasks()}
    assert Counter(r["taskId"] for r in recs if r["status"] == "ok") == Counter(expected)
    assert max(server.log.batch_items.values()) == 1  # no request answered twice
    by_batch = {b.batch_id: b.model_key for b in Journal(run_dir).batches.values() if b.batch_id}
    assert all(by_batch[r["batchId"]] == r["modelKey"] for r in recs)  # each model its own


def tmp_path_run(cfg):
    c = load_campaign(cfg).config
    return cfg.parent / "runs" / c.name / c.run_id


def test_a_batch_of_another_model_of_one_size_is_never_taken_for_ours(
    tmp_path, emulator, monkeypatch
):
    """Two Anthropic models of one size; both creations unconfirmed: B's batch was made (its
    answer lost), A's never. A's only candidate is B's batch: its results tell it is not A's."""
    server = emulator()
    cfg = two_anthropic_models(tmp_path, server)
    sent = AnthropicBatch.submit

    async def flaky(self, name, path, count, on_uploaded, known=frozenset()):
        if self.provider.model.name == "claude-3-5-sonnet-latest":
            await sent(self, name, path, count, on_uploaded, known)  # made; the answer is lost
        raise Transient("connection reset")

    monkeypatch.setattr(AnthropicBatch, "submit", flaky)
    first = run(cfg, wait_for_batches=False)
    assert [b.batch_id for b in Journal(first.run_dir).open_batches()] == [None, None]
    assert server.log.batches["anthropic"] == 1
    monkeypatch.setattr(AnthropicBatch, "submit", sent)
    again = run(cfg)
    assert again.exit_code == 0
    assert server.log.batches["anthropic"] == 2  # B's found, A's sent (it had never arrived)
    check_each_once(cfg, server)


def test_a_create_that_fails_after_another_model_made_one_of_its_size(
    tmp_path, emulator, monkeypatch
):
    """No crash: A's create is refused (overloaded, nothing made) just after B made a batch of
    the same size. A's batch is unconfirmed, not B's; it is then found to be none and sent."""
    server = emulator()
    cfg = two_anthropic_models(tmp_path, server)
    create_once = BatchClient.create_once

    async def refused_once(self, create, name, count, known=frozenset()):
        if self.provider.model.name != "claude-3-5-haiku-latest":
            return await create_once(self, create, name, count, known)
        first = True

        async def flaky():
            nonlocal first
            if first:
                first = False
                while server.log.batches["anthropic"] < 1:
                    await anyio.sleep(0.01)
                raise RateLimited("529 overloaded", 0.01, None)
            return await create()

        return await create_once(self, flaky, name, count, known)

    monkeypatch.setattr(BatchClient, "create_once", refused_once)
    outcome = run(cfg)
    assert outcome.exit_code == 0
    ids = [b.batch_id for b in Journal(outcome.run_dir).batches.values() if b.batch_id]
    assert len(ids) == len(set(ids)) == 2 == server.log.batches["anthropic"]
    check_each_once(cfg, server)


def test_an_api_failing_when_the_run_settles_stops_that_model_only(tmp_path, emulator, monkeypatch):
    """The batch list fails (network) when an unconfirmed batch is looked up: the run neither
    crashes nor sends it again; the model stops after its rounds of patience, and the next
    run settles it."""
    monkeypatch.setattr(runner, "POLL_FAILURES", 3)
    monkeypatch.setattr(BatchClient, "attempts", 1)
    server = emulator()
    cfg = batch_config(tmp_path, server)
    sent = OpenAIBatch.submit

    async def lost(self, *args):
        raise Transient("connection reset")

    monkeypatch.setattr(OpenAIBatch, "submit", lost)
    first = run(cfg, wait_for_batches=False)
    assert Journal(first.run_dir).open_batches()[0].batch_id is None
    monkeypatch.setattr(OpenAIBatch, "submit", sent)
    server.config.batch = BatchBehaviour(drop_replies={"list": 1000})  # the batch list fails
    outcome = run(cfg)
    assert outcome.exit_code == 1 and "batch API" in next(iter(outcome.state.fatal.values()))
    assert Journal(first.run_dir).open_batches()[0].batch_id is None  # still unconfirmed
    assert not server.log.arrivals and not server.log.batches["openai"]  # nothing paid
    server.config.batch = BatchBehaviour()
    assert run(cfg).exit_code == 0 and server.log.batches["openai"] == 1

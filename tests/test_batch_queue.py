"""OpenAI's batch queue (issue 32, item 8): a batch refused because the model's queue is full
(`token_limit_exceeded`) is a rate limit, not a fault: its tasks are sent again once the batches
in flight end, and the model is not stopped. A collected batch's uploaded input, which holds
every prompt, is deleted at the provider."""

from __future__ import annotations

from collections import Counter

from orchestrator.batch.journal import Journal
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from tests.test_batch_runs import batch_config, records, run


def _small_batches(monkeypatch, requests: int) -> None:
    from orchestrator.batch import openai as openai_batch

    limits = openai_batch.OpenAIBatch.limits
    monkeypatch.setattr(
        openai_batch.OpenAIBatch, "limits", type(limits)(requests, limits.max_bytes)
    )


def test_a_full_queue_waits_and_sends_again_and_no_task_fails(tmp_path, emulator, monkeypatch):
    _small_batches(monkeypatch, 12)  # 48 tasks: four batches, where the queue takes two
    server = emulator()
    server.config.batch = BatchBehaviour(processing_s=0.3, queue_limit=2)
    cfg = batch_config(tmp_path, server, samples=4)
    outcome = run(cfg)
    assert outcome.exit_code == 0, outcome
    recs = records(outcome.run_dir)
    expected = {t.task_id for t in Plan(load_campaign(cfg)).tasks()}
    assert Counter(r["taskId"] for r in recs) == Counter(expected)  # each once, none failed
    assert {r["status"] for r in recs} == {"ok"}
    journal = Journal(outcome.run_dir).batches.values()
    assert len(journal) > 4  # some were refused by the queue, and their tasks sent again
    assert server.log.batch_calls[("openai", "create", 200)] == len(journal)  # each answered
    assert max(server.log.batch_items.values()) == 1  # no request answered twice


def test_a_queue_full_for_longer_than_the_passes_still_finishes(tmp_path, emulator, monkeypatch):
    """Ten batches against a queue of two: more refusals than a run has passes. Waiting for room
    costs no pass, so no task is recorded failed."""
    _small_batches(monkeypatch, 12)
    server = emulator()
    server.config.batch = BatchBehaviour(processing_s=0.2, queue_limit=2)
    cfg = batch_config(tmp_path, server, samples=10)  # 120 tasks: ten batches
    outcome = run(cfg)
    assert outcome.exit_code == 0, outcome
    recs = records(outcome.run_dir)
    assert len(recs) == 120 and {r["status"] for r in recs} == {"ok"}
    assert max(server.log.batch_items.values()) == 1


def test_collected_inputs_are_deleted_at_the_provider(tmp_path, emulator):
    server = emulator()
    outcome = run(batch_config(tmp_path, server))
    assert outcome.exit_code == 0
    uploaded = [file_id for file_id, _ in server.log.uploads]
    assert uploaded and sorted(server.log.deleted_files) == sorted(uploaded)

"""Batch inputs larger than a server in the way takes (issue 32, item 1): against a gateway
that takes at most 1 MiB a request, a 2,400-task OpenAI batch (about 1.4 MB) got a 413 and the
run could never finish. Now the refused batch is abandoned in the journal (never sent), the
model's batches are halved, and the run finishes with every task submitted once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from orchestrator.batch.journal import Journal
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from tests.conftest import ROOT, cli
from tests.test_batch_runs import batch_config, records, run

MiB = 1 << 20


def test_a_2400_task_batch_behind_a_1_mib_gateway_finishes_each_task_once(tmp_path, emulator):
    server = emulator()
    server.config.batch = BatchBehaviour(body_cap=MiB)
    cfg = batch_config(tmp_path, server, samples=200)  # 12 conditions x 200: 2,400 tasks
    outcome = run(cfg)
    assert outcome.exit_code == 0, outcome
    recs = records(outcome.run_dir)
    expected = {t.task_id for t in Plan(load_campaign(cfg)).tasks()}
    assert len(expected) == 2400
    assert Counter(r["taskId"] for r in recs) == Counter(expected)  # each once
    assert {r["status"] for r in recs} == {"ok"}
    assert server.log.batch_calls[("openai", "upload", 413)] >= 1  # the first was too large
    assert max(server.log.batch_items.values()) == 1  # every request processed once
    assert sum(server.log.batch_submitted.values()) == 2400  # and submitted once
    batches = Journal(outcome.run_dir).batches.values()
    assert any(b.state == "abandoned" for b in batches)


def test_one_request_over_the_cap_is_that_tasks_final_outcome(tmp_path, emulator):
    server = emulator()
    server.config.batch = BatchBehaviour(body_cap=600)  # no single request fits
    cfg = batch_config(tmp_path, server, samples=1)
    outcome = run(cfg)
    recs = records(outcome.run_dir)
    assert len(recs) == 12 and {r["status"] for r in recs} == {"too_long"}
    assert all("413" in r["error"] for r in recs)
    assert not any(b.in_flight for b in Journal(outcome.run_dir).batches.values())


@pytest.mark.slow
def test_kill_9_after_a_refused_batch_sends_nothing_twice(tmp_path, emulator):
    """kill -9 once the run has abandoned a too-large batch and sent smaller ones: the next run
    sends what is left, and every task is submitted once."""
    server = emulator()
    server.config.batch = BatchBehaviour(body_cap=MiB, processing_s=3.0)
    cfg = batch_config(tmp_path, server, samples=200)
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's code
    )
    run_dir = tmp_path / "runs" / "b" / "r1"
    deadline = time.monotonic() + 120
    while not (
        (run_dir / "batches.ndjson").exists()
        and b'"created"' in (run_dir / "batches.ndjson").read_bytes()
        and b'"abandoned"' in (run_dir / "batches.ndjson").read_bytes()
    ):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "no batch was abandoned and sent smaller"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = cli("run", str(cfg), cwd=tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    expected = {t.task_id for t in Plan(load_campaign(cfg)).tasks()}
    ids = Counter(r["taskId"] for r in records(run_dir))
    assert set(ids) == expected and max(ids.values()) == 1
    assert set(server.log.batch_submitted) == expected
    assert max(server.log.batch_submitted.values()) == 1  # each task in one batch sent, once
    assert max(server.log.batch_items.values()) == 1


def test_a_later_run_sends_batches_the_size_the_server_took(tmp_path, emulator, monkeypatch):
    """The limits a 413 taught are journalled: the run that resumes a model stopped after its
    first batch sends the rest within them, with no 413 to learn them again."""
    from orchestrator.batch.wire import BatchClient
    from orchestrator.providers.errors import Fatal

    server = emulator()
    server.config.batch = BatchBehaviour(body_cap=MiB)
    cfg = batch_config(tmp_path, server, samples=400)  # 4,800 tasks, 2.8 MB: two halvings
    create_once, created = BatchClient.create_once, []

    async def stop_after_one(self, create, name, count, known=frozenset()):
        if created:
            raise Fatal("403 from the server: the key may not create more batches")
        created.append(name)
        return await create_once(self, create, name, count, known)

    monkeypatch.setattr(BatchClient, "create_once", stop_after_one)
    first = run(cfg)
    assert first.exit_code != 0 and len(created) == 1
    refused = server.log.batch_calls[("openai", "upload", 413)]
    assert refused == 2  # 4,800 then 2,400 tasks were too large; 1,200 went
    monkeypatch.setattr(BatchClient, "create_once", create_once)
    outcome = run(cfg)
    assert outcome.exit_code == 0, outcome
    assert server.log.batch_calls[("openai", "upload", 413)] == refused  # none more
    recs = records(outcome.run_dir)
    assert len(recs) == 4800 == len({r["taskId"] for r in recs})

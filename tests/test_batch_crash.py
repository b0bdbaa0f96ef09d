"""kill -9 of a batch run during upload, creation and polling: the next run submits nothing
twice and loses nothing (each request is answered once, each task has one record)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from orchestrator.batch.journal import Journal
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from tests.conftest import cli
from tests.test_batch_runs import batch_config


def _start(cfg: Path) -> subprocess.Popen:
    # a process of its own: the tests kill -9 it
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "160"},
    )


def _until(condition, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the run ended first: {proc.stderr.read().decode()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _finish(cfg: Path) -> None:
    """The next run, to the end: it only reads what the killed one left, so in this process."""
    done = cli("run", str(cfg), cwd=cfg.parent, timeout=120)
    assert done.returncode == 0, done.stderr


def _check_once_each(cfg: Path, server, protocol: str, batches: int = 1) -> None:
    expected = {t.task_id for t in Plan(load_campaign(cfg)).tasks()}
    run_dir = tmp_run(cfg)
    ids = Counter(
        orjson.loads(line)["taskId"]
        for line in (run_dir / "results.ndjson").read_bytes().splitlines()
    )
    assert set(ids) == expected and max(ids.values()) == 1
    assert server.log.batches[protocol] == batches  # created once: never submitted twice
    assert set(server.log.batch_items) == expected and max(server.log.batch_items.values()) == 1


def tmp_run(cfg: Path) -> Path:
    campaign = load_campaign(cfg)
    return Path(campaign.config.output_dir) / campaign.config.name / campaign.config.run_id


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["openai", "anthropic", "gemini"])
def test_kill_9_while_the_batch_is_created(tmp_path, emulator, protocol):
    """The provider made the batch, the reply never came: the next run finds it (OpenAI by its
    metadata, Gemini by its display name, Anthropic by its size and time) and polls it."""
    server = emulator()
    server.config.batch = BatchBehaviour(reply_delay_s={"create": 4})
    cfg = batch_config(tmp_path, server, protocol)
    proc = _start(cfg)
    _until(lambda: server.log.batches[protocol] == 1, proc)
    _kill(proc)
    assert Journal(tmp_run(cfg)).open_batches()[0].batch_id is None  # unknown to the run
    server.config.batch = BatchBehaviour()
    _finish(cfg)
    _check_once_each(cfg, server, protocol)


@pytest.mark.slow
def test_kill_9_during_the_upload(tmp_path, emulator):
    """The file arrived, no batch was made: the next run sends the batch (once)."""
    server = emulator()
    server.config.batch = BatchBehaviour(reply_delay_s={"upload": 4})
    cfg = batch_config(tmp_path, server)
    proc = _start(cfg)
    _until(lambda: len(server.log.uploads) == 1, proc)
    _kill(proc)
    server.config.batch = BatchBehaviour()
    _finish(cfg)
    _check_once_each(cfg, server, "openai")
    assert len(server.log.uploads) == 2  # the second upload is free; the batch was made once
    assert [b.state for b in Journal(tmp_run(cfg)).batches.values()].count("abandoned") == 1


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_kill_9_while_polling(tmp_path, emulator, protocol):
    server = emulator()
    server.config.batch = BatchBehaviour(processing_s=3.0)
    cfg = batch_config(tmp_path, server, protocol)
    proc = _start(cfg)
    run_dir = tmp_run(cfg)
    _until(
        lambda: (
            (run_dir / "batches.ndjson").exists()
            and b'"event":"state"' in (run_dir / "batches.ndjson").read_bytes()
        ),
        proc,
    )
    _kill(proc)
    _finish(cfg)
    _check_once_each(cfg, server, protocol)


def test_a_collection_cut_short_writes_the_rest_and_nothing_twice(tmp_path, emulator):
    """What kill -9 leaves when it comes while a batch's records are written: some records on
    disk, the journal without `collected`. The next run reads the results again (free) and
    writes only the missing records."""
    server = emulator()
    cfg = batch_config(tmp_path, server)
    _finish(cfg)
    run_dir = tmp_run(cfg)
    lines = (run_dir / "results.ndjson").read_bytes().splitlines(keepends=True)
    (run_dir / "results.ndjson").write_bytes(
        b"".join(lines[: len(lines) // 2]) + lines[len(lines) // 2][:40]
    )
    journal = (run_dir / "batches.ndjson").read_bytes().splitlines(keepends=True)
    assert b'"event":"collected"' in journal[-2] and b'"event":"deleted"' in journal[-1]
    (run_dir / "batches.ndjson").write_bytes(b"".join(journal[:-2]))
    _finish(cfg)
    _check_once_each(cfg, server, "openai")


@pytest.mark.slow
@pytest.mark.parametrize("processing_s", [0.0, 3.0])
def test_kill_9_while_two_batches_of_one_size_are_created_at_anthropic(
    tmp_path, emulator, processing_s
):
    """Anthropic keeps no name: two models' batches of one size, both unconfirmed, are told
    apart by their results (at once, or once they have ended), and neither is sent again."""
    server = emulator()
    server.config.batch = BatchBehaviour(reply_delay_s={"create": 4}, processing_s=processing_s)
    cfg = batch_config(tmp_path, server, "anthropic")
    cfg.write_text(
        cfg.read_text()
        + f"""
[[models]]
provider = "anthropic"
name = "claude-3-5-sonnet-latest"
base_url = "{server.base_url("anthropic")}"
temperature = 0.7
batch = true
"""
    )
    proc = _start(cfg)
    _until(lambda: server.log.batches["anthropic"] == 2, proc)
    _kill(proc)
    journal = Journal(tmp_run(cfg))
    assert [b.batch_id for b in journal.open_batches()] == [None, None]
    server.config.batch = BatchBehaviour()
    _finish(cfg)
    _check_once_each(cfg, server, "anthropic", batches=2)
    by_model = {b.model_key: b.batch_id for b in Journal(tmp_run(cfg)).batches.values()}
    recs = [
        orjson.loads(line) for line in (tmp_run(cfg) / "results.ndjson").read_bytes().splitlines()
    ]
    assert all(r["batchId"] == by_model[r["modelKey"]] for r in recs)  # each model its own batch

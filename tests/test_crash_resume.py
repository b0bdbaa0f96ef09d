"""kill -9 at random moments, resume each time: exactly one record per task at the end."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from tests.conftest import cli, openai_config


def _start(cfg: Path) -> subprocess.Popen:
    # a process of its own: the tests kill it (kill -9, SIGTERM) and read its exit code
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "120"},
    )


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _wait_for_progress(path: Path, proc: subprocess.Popen, timeout: float = 30) -> None:
    before, deadline = _lines(path), time.monotonic() + timeout
    while _lines(path) <= before and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_and_duplicates_nothing(tmp_path, emulator):
    server = emulator(latency_s=0.02)
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=40, limits="max_in_flight = 4")
    expected = {t.task_id for t in Plan(load_campaign(cfg)).tasks()}
    results = tmp_path / "runs" / "t" / "r1" / "results.ndjson"
    rng = random.Random(2026)
    kills = 0
    while kills < 6:
        proc = _start(cfg)
        _wait_for_progress(results, proc)
        time.sleep(rng.uniform(0.0, 0.4))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    assert kills >= 5, "the run finished before it could be killed five times"
    done = cli("run", str(cfg), cwd=tmp_path, timeout=120)  # the resume: no kill, no process
    assert done.returncode == 0, done.stderr
    ids = Counter(orjson.loads(line)["taskId"] for line in results.read_bytes().splitlines())
    assert set(ids) == expected
    assert max(ids.values()) == 1
    # A finished run calls no model again.
    calls = len(server.log.arrivals)
    again = cli("run", str(cfg), cwd=tmp_path, timeout=60)
    assert again.returncode == 0 and "already complete" in again.stdout
    assert len(server.log.arrivals) == calls


def test_sigterm_stops_flushes_and_prints_the_resume_command(tmp_path, emulator):
    server = emulator(latency_s=0.02)
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=40, limits="max_in_flight = 2")
    results = tmp_path / "runs" / "t" / "r1" / "results.ndjson"
    proc = _start(cfg)
    _wait_for_progress(results, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert b"resume with" in err and str(cfg).encode() in err
    data = results.read_bytes()
    assert data.endswith(b"\n")
    written = [orjson.loads(line) for line in data.splitlines()]
    assert 0 < len(written) < 480
    assert len({r["taskId"] for r in written}) == len(written)


def test_a_torn_last_line_is_repaired_and_its_task_runs_again(tmp_path, emulator):
    server = emulator()
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=2)
    assert cli("run", str(cfg), cwd=tmp_path, timeout=60).returncode == 0
    results = tmp_path / "runs" / "t" / "r1" / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    torn_id = orjson.loads(lines[-1])["taskId"]
    results.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    done = cli("run", str(cfg), cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and "repaired a torn last line" in done.stdout
    final = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    assert len(final) == 24 and final[-1]["taskId"] == torn_id

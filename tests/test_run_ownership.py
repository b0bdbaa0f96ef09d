"""One process owns a run folder, and a run folder resumes wherever it is."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.engine.lock import RunLock, RunLockedError
from orchestrator.errors import UserError
from tests.conftest import openai_config, write_config


def _start(*args: str) -> subprocess.Popen:
    # a process of its own: it holds the run's lock against another process, or is killed or
    # interrupted (kill -9, Ctrl-C) and its exit code read
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )


def _wait_for_results(results: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (results.exists() and results.stat().st_size) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)


def _task_ids(results: Path) -> Counter:
    return Counter(orjson.loads(line)["taskId"] for line in results.read_bytes().splitlines())


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.slow
def test_a_second_run_of_a_running_run_is_refused_and_nothing_is_paid_twice(tmp_path, emulator):
    server = emulator(latency_s=0.05)
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=40, limits="max_in_flight = 4")
    results = tmp_path / "runs" / "t" / "r1" / "results.ndjson"
    first = _start(str(cfg))
    _wait_for_results(results, first)
    second = CliRunner().invoke(app, ["run", str(cfg)])
    assert first.poll() is None, "the first run ended before the second one was tried"
    flat = _flat(second.output)
    assert second.exit_code == 2, second.output
    assert f"pid {first.pid} on {socket.gethostname()}, started" in flat
    assert "--wait" in flat and "Traceback" not in flat
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    ids = _task_ids(results)
    assert max(ids.values()) == 1 and len(ids) == 480
    assert len(server.log.arrivals) == 480  # every call paid once


@pytest.mark.slow
def test_wait_starts_when_the_holder_ends_and_calls_nothing_it_finished(tmp_path, emulator):
    # the first run must outlast the second's start (~2 s of imports on a loaded machine): at
    # 0.02 s a call it took 1.2 s and sometimes ended before the second one looked
    server = emulator(latency_s=0.1)
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=20, limits="max_in_flight = 4")
    results = tmp_path / "runs" / "t" / "r1" / "results.ndjson"
    first = _start(str(cfg))
    _wait_for_results(results, first)
    waiting = _start(str(cfg), "--wait")
    waited_out, waited_err = waiting.communicate(timeout=120)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and waiting.returncode == 0, (err, waited_err)
    assert f"in use by pid {first.pid}" in _flat(waited_out) and "waiting for it" in waited_out
    assert len(server.log.arrivals) == 240
    assert max(_task_ids(results).values()) == 1


def test_a_lock_left_by_a_killed_run_does_not_block(tmp_path, emulator):
    server = emulator(latency_s=0.02)
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=20, limits="max_in_flight = 4")
    results = tmp_path / "runs" / "t" / "r1" / "results.ndjson"
    killed = _start(str(cfg))
    _wait_for_results(results, killed)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert (results.parent / ".lock").exists()
    again = CliRunner().invoke(app, ["run", str(cfg)])
    assert again.exit_code == 0, again.output
    ids = _task_ids(results)
    assert len(ids) == 240 and max(ids.values()) == 1


def test_the_lock_excludes_a_second_holder_and_is_free_after_release(tmp_path):
    first, second = RunLock(tmp_path), RunLock(tmp_path)
    first.acquire()
    with pytest.raises(RunLockedError, match=f"pid {os.getpid()}"):
        second.acquire()
    first.release()
    second.acquire()  # free again
    second.release()


def test_a_moved_run_resumes_where_it_now_is_from_any_folder(tmp_path, emulator, monkeypatch):
    server = emulator()
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=5)
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    original = tmp_path / "runs" / "t" / "r1"
    lines = (original / "results.ndjson").read_bytes().splitlines(keepends=True)
    (original / "results.ndjson").write_bytes(b"".join(lines[:25]))  # 35 of 60 tasks pending
    moved = tmp_path / "elsewhere" / "night-1"
    moved.parent.mkdir()
    shutil.move(original, moved)
    cfg.unlink()  # the config that started it is gone too
    somewhere = tmp_path / "somewhere"
    somewhere.mkdir()
    monkeypatch.chdir(somewhere)
    calls_before = len(server.log.arrivals)

    result = CliRunner().invoke(app, ["run", str(moved)])
    assert result.exit_code == 0, result.output
    assert len(server.log.arrivals) - calls_before == 35
    ids = _task_ids(moved / "results.ndjson")
    assert len(ids) == 60 and max(ids.values()) == 1
    assert not original.exists() and list(somewhere.iterdir()) == []


@pytest.mark.parametrize("flag", [["--run-id", "other"], ["--samples", "3"]])
def test_run_id_or_samples_with_a_run_folder_is_refused(tmp_path, emulator, flag):
    server = emulator()
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=2)
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "t" / "r1"
    before = sorted(p.name for p in run_dir.iterdir())
    result = CliRunner().invoke(app, ["run", str(run_dir), *flag])
    flat = _flat(result.output)
    assert result.exit_code == 2, result.output
    assert f"option '{flag[0]}'" in flat and "drop" in flat
    assert sorted(p.name for p in run_dir.iterdir()) == before
    assert not (tmp_path / "runs" / "t" / "other").exists()


def test_a_lock_in_a_folder_that_cannot_hold_one_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="cannot open the run's lock file") as caught:
        RunLock(tmp_path / "gone").acquire()
    assert "fix:" in str(caught.value)


def test_a_moved_run_resumes_without_the_price_table_its_config_named(
    tmp_path, emulator, monkeypatch
):
    server = emulator()
    (tmp_path / "my-prices.toml").write_text('[models."fake-model"]\ninput = 1.0\noutput = 2.0\n')
    cfg = openai_config(
        tmp_path, server.base_url("openai"), samples=2, extra='prices = "my-prices.toml"'
    )
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "t" / "r1"
    results = run_dir / "results.ndjson"
    results.write_bytes(b"".join(results.read_bytes().splitlines(keepends=True)[:10]))
    moved = tmp_path / "moved"
    shutil.move(run_dir, moved)
    (tmp_path / "my-prices.toml").unlink()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", str(moved)])
    assert result.exit_code == 0, result.output
    assert len(_task_ids(moved / "results.ndjson")) == 24
    costs = [
        orjson.loads(line)["costUsd"]
        for line in (moved / "results.ndjson").read_bytes().splitlines()
    ]
    assert all(c and c > 0 for c in costs)  # resumed calls are priced as the run's snapshot says


def test_a_results_file_given_for_a_run_folder_names_the_folder(tmp_path, emulator):
    server = emulator()
    cfg = openai_config(tmp_path, server.base_url("openai"), samples=1)
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    results = tmp_path / "runs" / "t" / "r1" / "results.ndjson"
    result = CliRunner().invoke(app, ["run", str(results)])
    assert result.exit_code == 2 and f"orchestrator run {results.parent}" in _flat(result.output)


def test_ctrl_c_stops_a_run_on_an_instant_respondent(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "fast"
        jobs = ["paired"]
        samples = 100000
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "instant"
        """,
    )
    results = tmp_path / "runs" / "fast" / "default" / "results.ndjson"
    proc = _start(str(cfg))
    _wait_for_results(results, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)  # the old engine never saw the signal
    assert proc.returncode == 130 and "resume with" in err

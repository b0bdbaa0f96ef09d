"""`orchestrator history CAMPAIGN_DIR`: one row per night, in the terminal and as csv/parquet,
from three nights of a campaign run by the real CLI against the emulator."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import orjson
import polars as pl
import pytest

from orchestrator.emulator.server import Emulator, EmulatorConfig, Faults
from orchestrator.engine.lock import RunLock
from tests.conftest import cli, write_config

NIGHTS = ["2026-12-01", "2026-12-02", "2026-12-03"]
CONFIG = """
    name = "nightly"
    jobs = ["paired"]
    samples = 5
    seed = 11
    output_dir = "{runs}"
    [[models]]
    provider = "openai"
    name = "fake-model"
    base_url = "{url}"
    temperature = 0.7
    price = {{input = 2.5, output = 10}}
    [[models]]
    provider = "simulated"
    name = "sim-respondent"
    temperature = 1.0
    [models.simulate]
    parse_error_rate = 0.1
    refusal_rate = 0.1
    draws = "run"
    system_fingerprint = "fp_sim1"
    [[models.simulate.drift]]
    from_run = "2026-12-03"
    served_model = "sim-respondent-2"
    system_fingerprint = "fp_sim2"
    [limits.openai]
    max_attempts = 2
    backoff_base_s = 0.01
    backoff_max_s = 0.02
    """
TASKS = 120  # 12 cells x 5 samples x 2 models
OPENAI, SIM = "openai/fake-model", "simulated/sim-respondent"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    """Night 1 as planned; night 2 the provider answers only 500s (its 60 tasks end failed);
    night 3 the provider serves a new model version and the simulated one drifts."""
    tmp = tmp_path_factory.mktemp("history")
    server = Emulator(EmulatorConfig(seed=5)).start_in_thread()
    try:
        cfg = write_config(tmp, CONFIG.format(runs=tmp / "runs", url=server.base_url("openai")))
        for night in NIGHTS:
            server.config.faults = Faults(server_error=1.0 if night == NIGHTS[1] else 0.0)
            server.config.served_as = (
                {"fake-model": "fake-model-2026-12-03"} if night == NIGHTS[2] else {}
            )
            log = ["--log", "auto"] if night != NIGHTS[2] else []
            done = cli("run", str(cfg), "--run-id", night, *log, cwd=tmp)
            assert done.returncode == (1 if night == NIGHTS[1] else 0), done.stderr
    finally:
        server.stop()
    return tmp / "runs" / "nightly"


def _records(run: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run / "results.ndjson").read_bytes().splitlines()]


def _count(run: Path, status: str) -> int:
    return sum(r["status"] == status for r in _records(run))


def _history(
    campaign: Path, *args: str, cwd: Path
) -> tuple[dict[str, list[str]], subprocess.CompletedProcess]:
    """Run history; its terminal rows by run id, as the non-empty cells of each line."""
    done = cli("history", str(campaign), *args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    rows = {}
    for line in done.stdout.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if (
            cells
            and re.fullmatch(r"[\w.-]+", cells[0])
            and cells[0] in {p.name for p in campaign.iterdir()}
        ):
            rows[cells[0]] = cells
    return rows, done


def _folder_state(folder: Path) -> dict[str, tuple[int, int]]:
    """The run's own files: its columnar snapshot (a cache any reader may bring up to date,
    engine/columnar.py) aside."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "results.snapshot" not in p.parts
    }


def test_one_row_per_night_with_counts_spend_and_served_models(campaign, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one line per row, to read the cells back
    runs = [campaign / night for night in NIGHTS]
    before = {night: _folder_state(campaign / night) for night in NIGHTS}
    rows, done = _history(campaign, cwd=campaign.parent)
    assert f"wrote {campaign / 'history.csv'} and {campaign / 'history.parquet'}" in done.stdout
    assert {night: _folder_state(campaign / night) for night in NIGHTS} == before  # runs untouched

    manifests = [orjson.loads((r / "manifest.json").read_bytes()) for r in runs]
    spend = [sum(rec["costUsd"] or 0 for rec in _records(r)) for r in runs]
    assert spend[0] > 0 and spend[1] == 0 and spend[2] > 0  # a 500 is not paid for
    parse = [_count(r, "parse_error") for r in runs]
    refused = [_count(r, "refused") for r in runs]
    assert min(parse) > 0 and min(refused) > 0
    served = [
        [f"{OPENAI}: fake-model", f"{SIM}: sim-respondent"],
        [f"{SIM}: sim-respondent"],
        [f"{OPENAI}: fake-model-2026-12-03", f"{SIM}: sim-respondent-2"],
    ]
    fingerprints = [
        [f"{OPENAI}: fp_emulator", f"{SIM}: fp_sim1"],
        [f"{SIM}: fp_sim1"],
        [f"{OPENAI}: fp_emulator", f"{SIM}: fp_sim2"],
    ]
    expected = pl.DataFrame(
        {
            "run": NIGHTS,
            "status": ["complete", "60 tasks pending", "complete"],
            "tasks": [TASKS] * 3,
            "done": [TASKS, 60, TASKS],
            "failed": [0, 60, 0],
            "parse_errors": parse,
            "refusals": refused,
            "served_models": served,
            "fingerprints": fingerprints,
            "software": [m["software"] for m in manifests],
            "plan": [manifests[0]["plan"]["hash"][:8]] * 3,  # the same plan each night
            "log": [
                str(campaign / "logs" / f"{NIGHTS[0]}.log"),
                str(campaign / "logs" / f"{NIGHTS[1]}.log"),
                None,
            ],
        }
    )

    for frame in (
        pl.read_parquet(campaign / "history.parquet"),
        pl.read_csv(
            campaign / "history.csv",
            try_parse_dates=True,
            schema_overrides={"plan": pl.String, "software": pl.String},
        ),
    ):
        if frame["served_models"].dtype == pl.String:  # the csv joins lists with "; "
            frame = frame.with_columns(pl.col("served_models", "fingerprints").str.split("; "))
        assert frame.select(expected.columns).equals(expected), frame
        assert frame["spend_usd"].to_list() == pytest.approx(spend, rel=1e-12)
        assert [t.isoformat() for t in frame["started"]] == [m["createdAt"] for m in manifests]
        last = [max(rec["finishedAt"] for rec in _records(r)) for r in runs]
        assert [t.isoformat() for t in frame["last_result"]] == last

    for i, night in enumerate(NIGHTS):  # the terminal shows the same rows
        started = manifests[i]["createdAt"]
        served_cell = [f"{s} ({f.split(': ')[1]})" for s, f in zip(served[i], fingerprints[i])]
        same_day = last[i][:10] == started[:10]
        want = [
            night,
            f"{started[:10]} {started[11:16]}",
            last[i][11:16] if same_day else f"{last[i][5:10]} {last[i][11:16]}",
            expected["status"][i],
            str(TASKS),
            str(expected["done"][i]),
            str(expected["failed"][i]),
            str(parse[i]),
            str(refused[i]),
            f"{spend[i]:.4f}",
            "; ".join(served_cell),
            expected["software"][i],
            expected["plan"][i],
            *(["yes"] if i < 2 else []),
        ]
        assert rows[night] == want


def test_running_and_interrupted_are_read_from_the_lock_without_taking_it(campaign, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    first, second, third = (campaign / night for night in NIGHTS)
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    try:
        # Night 1: its process died holding the lock (kill -9: the kernel drops the flock, the
        # file keeps its holder). Night 2: the pid is alive but the process started after the
        # lock was taken (a pid reused after a reboot): interrupted too.
        (first / ".lock").write_bytes(
            orjson.dumps({"pid": dead.pid, "host": host, "since": "2026-12-01T02:00:00+00:00"})
        )
        (second / ".lock").write_bytes(
            orjson.dumps({"pid": os.getpid(), "host": host, "since": "2000-01-01T00:00:00+00:00"})
        )
        with RunLock(third) as lock:  # night 3 is held, by this live process
            lock.acquire()
            rows, _ = _history(campaign, cwd=campaign.parent)
        assert [rows[n][3] for n in NIGHTS] == [
            "interrupted",
            "interrupted, 60 tasks pending",
            f"running (pid {os.getpid()}, {host})",
        ]
        assert pl.read_parquet(campaign / "history.parquet")["status"].to_list() == [
            rows[n][3] for n in NIGHTS
        ]
        (first / ".lock").write_bytes(orjson.dumps({"pid": 1, "host": "elsewhere", "since": "x"}))
        rows, _ = _history(campaign, cwd=campaign.parent)
        assert rows[NIGHTS[0]][3] == "locked (pid 1, elsewhere)"  # not checkable from this host
    finally:
        for run in (first, second):
            (run / ".lock").write_bytes(b"")
    rows, _ = _history(campaign, cwd=campaign.parent)
    assert [rows[n][3] for n in NIGHTS] == ["complete", "60 tasks pending", "complete"]


def test_a_cut_night_one_without_results_and_a_damaged_one(campaign, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    folder = tmp_path / "nightly"
    shutil.copytree(campaign / NIGHTS[0], folder / "a-cut")
    shutil.copytree(campaign / NIGHTS[0], folder / "b-empty")
    lines = (folder / "a-cut" / "results.ndjson").read_bytes().splitlines(keepends=True)
    (folder / "a-cut" / "results.ndjson").write_bytes(
        b"".join(lines[:10]) + lines[10][:30]
    )  # torn 11th
    (folder / "b-empty" / "results.ndjson").write_bytes(b"")
    shutil.copytree(campaign / NIGHTS[0], folder / "c-bad")
    (folder / "c-bad" / "results.ndjson").write_bytes(
        b"".join(lines[:5]) + b"not json\n" + b"".join(lines[5:])
    )
    out = tmp_path / "reports" / "nightly"
    rows, done = _history(folder, "--out", str(out), cwd=tmp_path)
    assert rows["a-cut"][3:7] == ["110 tasks pending", str(TASKS), "10", "0"]
    assert rows["b-empty"][2:7] == ["no results", str(TASKS), "0", "0", "0"]  # no last result
    assert rows["c-bad"][1:] == [
        f"unreadable (see orchestrator status {folder / 'c-bad'})"
    ]  # the rest still shown
    frame = pl.read_parquet(out / "history.parquet")
    assert frame["done"].to_list() == [10, 0, None] and frame["served_models"][1].to_list() == []
    assert frame["last_result"][1] is None
    assert not (folder / "history.csv").exists() and not (folder / "history.parquet").exists()
    assert f"wrote {out / 'history.csv'} and {out / 'history.parquet'}" in done.stdout


def test_bad_folders_exit_2_and_write_nothing(campaign, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # messages unwrapped, whatever the paths' lengths
    empty = tmp_path / "empty"
    empty.mkdir()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    night = campaign / NIGHTS[0]
    cases = [
        ([str(tmp_path / "missing")], "not a campaign folder"),
        ([str(empty)], "holds no runs"),
        ([str(night)], "this is a run folder"),
        ([str(campaign), "--out", str(a_file)], "--out is a file"),
        ([str(campaign), "--out", str(night / "reports")], "inside the run folder"),
    ]
    before = _folder_state(campaign)
    for args, message in cases:
        done = cli("history", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and "fix:" in done.stderr and "Traceback" not in done.stderr
        assert done.stdout == ""
    assert _folder_state(campaign) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "notes.txt"]
    assert list(empty.iterdir()) == [] and a_file.read_text() == "mine"


def test_help_explains_the_columns(tmp_path):
    done = cli("history", "--help", cwd=tmp_path)
    text = " ".join(done.stdout.split())
    for column in (
        "started",
        "last result",
        "tasks pending",
        "running (pid, host)",
        "interrupted",
        "parse err",
        "spend $",
        "fingerprint",
        "plan hash",
        "--out",
    ):
        assert column in text, column

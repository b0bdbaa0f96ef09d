"""Runs named by date (--run-id auto), the `latest` link, run --log, and what every record now
says about who served it: what nightly re-runs stand on."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from tests.conftest import cli, openai_config, run_quietly, write_config

SIMULATED = """
name = "nightly"
jobs = ["paired"]
samples = 4
seed = 5
[[models]]
provider = "simulated"
name = "sim"
temperature = 1.0
[models.simulate]
{simulate}
"""


def _records(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_auto_names_runs_by_date_points_latest_and_never_touches_a_finished_night(tmp_path):
    config = write_config(tmp_path, SIMULATED.format(simulate='draws = "run"'))
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    first = cli("run", str(config), "--run-id", "auto", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    campaign = tmp_path / "runs" / "nightly"
    if not (campaign / day).is_dir():  # the run started just after midnight UTC
        day = datetime.now(UTC).strftime("%Y-%m-%d")
    assert os.readlink(campaign / "latest") == day
    night = _snapshot(campaign / day)
    assert cli("run", str(config), "--run-id", "auto", cwd=tmp_path).returncode == 0
    assert os.readlink(campaign / "latest") == f"{day}-2"
    assert _snapshot(campaign / day) == night  # the finished night is never touched
    manifest = json.loads((campaign / f"{day}-2" / "manifest.json").read_text())
    assert manifest["runId"] == f"{day}-2" and manifest["config"]["run_id"] == f"{day}-2"
    # the latest night resumes through the link, where it is, and calls nothing
    again = cli("run", str(campaign / "latest"), cwd=tmp_path)
    assert again.returncode == 0 and "run already complete" in again.stdout
    assert len(_records(campaign / f"{day}-2")) == len(_records(campaign / day))


def test_latest_is_no_run_id(tmp_path):
    config = write_config(tmp_path, SIMULATED.format(simulate=""))
    done = cli("run", str(config), "--run-id", "latest", cwd=tmp_path)
    assert done.returncode == 2 and "'latest' names the link" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_log_auto_keeps_what_the_run_printed_and_how_it_ended(tmp_path, monkeypatch):
    config = write_config(tmp_path, SIMULATED.format(simulate=""))
    done = cli("run", str(config), "--run-id", "n1", "--log", "auto", cwd=tmp_path)
    assert done.returncode == 0
    log = (tmp_path / "runs" / "nightly" / "logs" / "n1.log").read_text().splitlines()
    assert log[0].startswith("== ") and log[0].endswith(
        f"orchestrator run {config} --run-id n1 --log auto"
    )
    assert "results: runs/nightly/n1/results.ndjson" in log and log[-1].endswith(" exit 0")
    assert "results: runs/nightly/n1/results.ndjson" in done.stdout  # the terminal still gets it
    # a run refused before it starts: no run folder, but the reason is in the log
    monkeypatch.delenv("NIGHTLY_TEST_KEY", raising=False)
    keyed = write_config(
        tmp_path,
        """
        name = "keyed"
        jobs = ["paired"]
        [[models]]
        provider = "openai"
        name = "m"
        base_url = "http://127.0.0.1:9/v1"
        api_key_env = "NIGHTLY_TEST_KEY"
        """,
        "keyed.toml",
    )
    refused = cli("run", str(keyed), "--run-id", "auto", "--log", "auto", cwd=tmp_path)
    assert refused.returncode == 2
    (log_file,) = (tmp_path / "runs" / "keyed" / "logs").iterdir()
    text = log_file.read_text()
    assert "environment variable NIGHTLY_TEST_KEY is not set" in text and text.rstrip().endswith(
        "exit 2"
    )
    assert [p.name for p in (tmp_path / "runs" / "keyed").iterdir()] == ["logs"]


def test_records_say_which_model_string_and_fingerprint_the_server_answered_with(
    tmp_path, emulator
):
    server = emulator(
        served_as={"fake-model": "fake-model-2026-12-01"}, system_fingerprint="fp_44709d6fcb"
    )
    run_quietly(openai_config(tmp_path, server.base_url("openai"), samples=1))
    records = _records(tmp_path / "runs" / "t" / "r1")
    assert records and {(r["servedModel"], r["systemFingerprint"]) for r in records} == {
        ("fake-model-2026-12-01", "fp_44709d6fcb")
    }
    assert {r["model"]["name"] for r in records} == {"fake-model"}  # what was asked for


def test_compare_flags_a_new_fingerprint_behind_the_same_model_string(tmp_path, emulator):
    server = emulator()  # one server (one base_url, so one model identity), updated overnight
    for run_id, fingerprint in (("n1", "fp_one"), ("n2", "fp_two")):
        server.config.system_fingerprint = fingerprint
        run_quietly(openai_config(tmp_path, server.base_url("openai"), samples=2, run_id=run_id))
    campaign = tmp_path / "runs" / "t"
    done = cli(
        "compare",
        str(campaign / "n1"),
        str(campaign / "n2"),
        "--fail-on",
        "fingerprint",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    flags = json.loads((campaign / "compare" / "n1__n2.json").read_text())["flags"]
    # (the emulator's answers are its own draws each night: effects may move too)
    assert [
        (f["experiment"], f["detail"])
        for f in flags
        if f["flag"] in ("fingerprint", "served_model")
    ] == [("all experiments", "new fp_two (before: fp_one)")]


def _answers(run_dir: Path) -> dict[str, str]:
    return {r["taskId"]: r["response"].get("raw") for r in _records(run_dir)}


@pytest.mark.parametrize("draws, same", [("task", True), ("run", False)])
def test_the_simulated_respondent_draws_anew_each_run_only_when_asked(tmp_path, draws, same):
    config = write_config(tmp_path, SIMULATED.format(simulate=f'draws = "{draws}"'))
    for run_id in ("a", "b"):
        assert cli("run", str(config), "--run-id", run_id, cwd=tmp_path).returncode == 0
    a, b = (_answers(tmp_path / "runs" / "nightly" / r) for r in ("a", "b"))
    assert a.keys() == b.keys()  # the same tasks
    assert (a == b) is same


def test_drift_changes_the_respondent_from_its_run_on(tmp_path):
    config = write_config(
        tmp_path,
        SIMULATED.format(
            simulate="""
        [[models.simulate.drift]]
        from_run = "2026-12-02"
        served_model = "sim-v2"
        system_fingerprint = "fp_v2"
        [models.simulate.drift.effects.anchoring-first-number]
        conditions = [{mean = 5000, sd = 1}, {mean = 5000, sd = 1}]
        """
        ),
    )
    for run_id in ("2026-12-01", "2026-12-02", "2026-12-03"):
        assert cli("run", str(config), "--run-id", run_id, cwd=tmp_path).returncode == 0
    for run_id, served, high in (
        ("2026-12-01", ("sim", None), False),
        ("2026-12-02", ("sim-v2", "fp_v2"), True),
        ("2026-12-03", ("sim-v2", "fp_v2"), True),
    ):
        records = _records(tmp_path / "runs" / "nightly" / run_id)
        assert {(r["servedModel"], r["systemFingerprint"]) for r in records} == {served}
        anchors = [
            r["response"]["value"]
            for r in records
            if r["experimentSlug"] == "anchoring-first-number" and r["status"] == "ok"
        ]
        assert anchors and all((abs(v - 5000) < 10) is high for v in anchors)


def test_auto_reuses_tonights_run_while_it_is_open_so_nothing_is_paid_twice(tmp_path):
    """A second `run --run-id auto` the same day (a doubled schedule, a retry by hand) resumes
    tonight's run while it is unfinished, and is refused while it is running, instead of
    calling every task again in a new folder."""
    from orchestrator.engine.lock import RunLock

    config = write_config(tmp_path, SIMULATED.format(simulate='draws = "run"'))
    campaign = tmp_path / "runs" / "nightly"
    assert cli("run", str(config), "--run-id", "auto", cwd=tmp_path).returncode == 0
    (night,) = [
        p for p in campaign.iterdir() if p.name != "latest" and (p / "manifest.json").is_file()
    ]
    results = night / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:10]))  # cut short: tonight is unfinished
    resumed = cli("run", str(config), "--run-id", "auto", cwd=tmp_path)
    assert resumed.returncode == 0 and f"resuming {night.relative_to(tmp_path)}" in resumed.stdout
    assert sorted(p.name for p in campaign.iterdir() if (p / "manifest.json").is_file()) == [
        night.name,
        "latest",
    ]
    assert len(results.read_bytes().splitlines()) == len(lines)  # only the missing tasks ran
    # finished: the next run is a night of its own; while that one runs, a third is refused
    assert cli("run", str(config), "--run-id", "auto", cwd=tmp_path).returncode == 0
    second = campaign / f"{night.name}-2"
    with RunLock(second) as lock:
        lock.acquire()
        refused = cli("run", str(config), "--run-id", "auto", cwd=tmp_path)
    assert refused.returncode == 2 and "in use" in refused.stderr
    assert not (campaign / f"{night.name}-3").exists()


@pytest.mark.parametrize(
    "given, message",
    [
        ("{tmp}", "names a folder"),
        ("{tmp}/no/such/dir/x.log", "does not exist"),
        ("{tmp}/night/results.ndjson", "inside the run folder"),
    ],
)
def test_a_log_that_cannot_be_a_file_is_refused_before_anything_runs(tmp_path, given, message):
    config = write_config(tmp_path, SIMULATED.format(simulate=""))
    (tmp_path / "night").mkdir()  # a finished night: its results must never get log lines
    (tmp_path / "night" / "manifest.json").write_text("{}")
    done = cli("run", str(config), "--log", given.format(tmp=tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "no").exists()
    assert not (tmp_path / "night" / "results.ndjson").exists()


def test_a_config_changed_the_same_day_gets_a_night_of_its_own(tmp_path):
    """Tonight's run was cut short; the config then changed (its seed): the next auto run must
    not try to resume a night of another plan (refused all day) but start its own."""
    config = write_config(tmp_path, SIMULATED.format(simulate=""))
    assert cli("run", str(config), "--run-id", "auto", cwd=tmp_path).returncode == 0
    campaign = tmp_path / "runs" / "nightly"
    night = campaign / os.readlink(campaign / "latest")
    results = night / "results.ndjson"
    results.write_bytes(b"".join(results.read_bytes().splitlines(keepends=True)[:5]))
    config.write_text(config.read_text().replace("seed = 5", "seed = 6"))
    done = cli("run", str(config), "--run-id", "auto", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert os.readlink(campaign / "latest") == f"{night.name}-2"
    assert len(results.read_bytes().splitlines()) == 5  # the cut night is left as it was

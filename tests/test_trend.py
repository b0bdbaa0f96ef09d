"""`orchestrator trend`: four nights of a simulated campaign whose provider changes the model
behind the name from night 3 (an unannounced update: the anchoring effect reverses, the served
model string and the system fingerprint change). The trend must follow every effect night by
night, show the shift, and mark exactly that night; and it writes into no run folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, cli, write_config

NIGHTS = ["n1", "n2", "n3", "n4"]
SHIFTED = "anchoring-first-number"
BEFORE = (1150.0, 880.0)  # condition means, sd 10: a night's effect is known to about +-7
AFTER = (880.0, 1150.0)
KEY = ["study", "measure", "experiment", "strategy", "modelKey"]

CONFIG = f"""
    name = "nightly"
    jobs = ["paired"]
    seed = 11
    output_dir = "runs"
    [[models]]
    provider = "simulated"
    name = "sim-respondent"
    temperature = 1.0
    [models.simulate]
    draws = "run"
    system_fingerprint = "fp_one"
    [models.simulate.effects.{SHIFTED}]
    conditions = [{{mean = {BEFORE[0]}, sd = 10}}, {{mean = {BEFORE[1]}, sd = 10}}]
    [[models.simulate.drift]]
    from_run = "n3"
    served_model = "sim-respondent-v2"
    system_fingerprint = "fp_two"
    [models.simulate.drift.effects.{SHIFTED}]
    conditions = [{{mean = {AFTER[0]}, sd = 10}}, {{mean = {AFTER[1]}, sd = 10}}]
    """


def planted(means: tuple[float, float]) -> float:
    """The effect the simulated respondent is set to show, in the job's stated direction."""
    job = json.loads((ROOT / "jobs" / "paired.json").read_text(encoding="utf-8"))
    metric = next(e["metric"] for e in job["experiments"] if e["experimentSlug"] == SHIFTED)
    difference = means[0] - means[1]
    return difference if metric["direction"] == "condition0-minus-condition1" else -difference


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under a folder with its size and modification time, the results' columnar
    snapshots aside (a cache any reader may bring up to date: engine/columnar.py)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "results.snapshot" not in p.parts
    }


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # messages and paths on one line each, as checked


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("trend")
    config = write_config(home, CONFIG)
    for night in NIGHTS:
        done = cli("run", str(config), "--run-id", night, cwd=home)
        assert done.returncode == 0, done.stderr
    return home / "runs" / "nightly"


def test_trend_follows_each_effect_and_marks_the_served_model_change(campaign, tmp_path):
    runs_before = tree(campaign)
    out = tmp_path / "trend"
    done = cli("trend", str(campaign), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert tree(campaign) == runs_before  # read only: no run folder (nor the campaign's) written

    rows = pl.read_csv(out / "trend.csv")
    assert pl.read_parquet(out / "trend.parquet").equals(rows, null_equal=True)
    per_effect = rows.group_by(KEY).agg(pl.col("run"))
    assert per_effect.height == 6  # the six experiments of the benchmark, one model
    assert all(runs == NIGHTS for runs in per_effect["run"].to_list())  # 4 nights, in order

    shifted = rows.filter(pl.col("experiment") == SHIFTED).sort("night")
    effect = dict(zip(shifted["run"], shifted["effect"], strict=True))
    before, after = planted(BEFORE), planted(AFTER)
    for night in NIGHTS:  # each night near what was planted for it (a tenth of the effect)
        assert effect[night] == pytest.approx(
            before if night < "n3" else after, abs=abs(before) / 10
        )
    shift = (effect["n3"] + effect["n4"]) / 2 - (effect["n1"] + effect["n2"]) / 2
    assert shift == pytest.approx(after - before, abs=abs(after - before) / 10)
    assert (shifted["ci_low"] < shifted["effect"]).all() and (
        shifted["effect"] < shifted["ci_high"]
    ).all()

    changed = rows.group_by("run").agg(pl.col("served_changed").unique()).sort("run")
    assert changed.rows() == [("n1", [False]), ("n2", [False]), ("n3", [True]), ("n4", [False])]
    served = rows.unique("run").sort("run").select("run", "served", "fingerprints").rows()
    assert served == [
        ("n1", "sim-respondent", "fp_one"),
        ("n2", "sim-respondent", "fp_one"),
        ("n3", "sim-respondent-v2", "fp_two"),
        ("n4", "sim-respondent-v2", "fp_two"),
    ]

    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h2>Trend: paired</h2>" in page and "<svg" in page
    assert "<!-- served: sim-respondent-v2" in page  # the marker's label, drawn in the figure
    assert "sim-respondent [fp_one] -&gt; sim-respondent-v2 [fp_two]" in page  # the changes list
    md = (out / "report.md").read_text(encoding="utf-8")
    assert (
        "| n3 | simulated/sim-respondent | sim-respondent [fp_one] -> sim-respondent-v2 [fp_two] |"
        in md
    )
    assert "![trend-paired](trend-paired.png)" in md
    assert (out / "trend-paired.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "trend-paired.svg").read_text(encoding="utf-8").startswith("<svg")

    assert (
        "6 effect(s) followed over 4 night(s) (n1 .. n4); 1 served-model change(s)" in done.stdout
    )
    assert (
        "n3  simulated/sim-respondent: sim-respondent [fp_one] -> sim-respondent-v2 [fp_two]"
        in done.stdout
    )
    assert str(out / "report.html") in done.stdout


def test_trend_writes_beside_the_runs_and_skips_a_night_it_cannot_read(campaign, tmp_path):
    copy = tmp_path / "nightly"
    shutil.copytree(campaign, copy)
    unfinished = copy / "n5"  # started, no results yet
    unfinished.mkdir()
    shutil.copy(copy / "n4" / "manifest.json", unfinished / "manifest.json")
    done = cli("trend", str(copy), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "skipped run n5" in done.stderr and "no results yet" in done.stderr
    assert not (unfinished / "trend").exists() and sorted(p.name for p in unfinished.iterdir()) == [
        "manifest.json"
    ]
    rows = pl.read_csv(copy / "trend" / "trend.csv")
    assert rows["run"].unique(maintain_order=True).to_list() == NIGHTS
    assert "over 4 night(s)" in done.stdout


def test_trend_refuses_what_is_not_a_campaign_folder_and_writes_nothing(campaign, tmp_path):
    before = tree(campaign)
    only_unfinished = tmp_path / "unfinished"
    (only_unfinished / "n1").mkdir(parents=True)
    shutil.copy(campaign / "n1" / "manifest.json", only_unfinished / "n1" / "manifest.json")
    cases = [
        ((str(tmp_path / "missing"),), "not a campaign folder"),
        ((str(campaign / "n1"),), "this is a run folder, not a campaign folder"),
        ((str(tmp_path),), "the campaign folder holds no runs"),
        ((str(only_unfinished),), "no run of this campaign could be read"),
        ((str(campaign), "--out", str(campaign / "n2" / "trend")), "inside the run folder"),
    ]
    for args, message in cases:
        listing = sorted(str(p) for p in tmp_path.rglob("*"))
        done = cli("trend", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr and "fix:" in done.stderr and "Traceback" not in done.stderr
        assert sorted(str(p) for p in tmp_path.rglob("*")) == listing  # nothing written
    assert tree(campaign) == before


def test_every_panel_of_a_study_without_strategies_has_its_nights(tmp_path):
    """The judge-history study has no strategies (a null in the panel key): each of its panels
    must still hold every night, not be drawn empty."""
    from orchestrator.nightly.trend_data import collect
    from orchestrator.nightly.trend_plot import PANEL, panel_rows

    config = write_config(
        tmp_path,
        """
        name = "judged"
        jobs = ["judge-history"]
        samples = 3
        [[models]]
        provider = "simulated"
        name = "judge"
        temperature = 1.0
        [models.simulate]
        draws = "run"
        [models.simulate.judge]
        pull = 0.4
        """,
    )
    for night in ("n1", "n2"):
        assert cli("run", str(config), "--run-id", night, cwd=tmp_path).returncode == 0
    found = collect(tmp_path / "runs" / "judged")
    part = found.rows.filter(pl.col("study") == "judge-history")
    panels = part.select(PANEL).unique().rows()
    assert panels and all(key[2] is None for key in panels)
    assert [panel_rows(part, key).height for key in panels] == [2] * len(panels)


def test_a_received_campaign_folder_s_links_are_never_written_through(campaign, tmp_path):
    copy = tmp_path / "nightly"
    shutil.copytree(campaign, copy)
    victim = tmp_path / "victim.csv"
    victim.write_text("mine\n")
    (copy / "trend").mkdir(exist_ok=True)
    for name in ("trend.csv", "report.md"):
        (copy / "trend" / name).unlink(missing_ok=True)
        (copy / "trend" / name).symlink_to(victim)  # planted by whoever sent the folder
    done = cli("trend", str(copy), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "mine\n"
    assert not (copy / "trend" / "trend.csv").is_symlink()

    shutil.rmtree(copy / "trend")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (copy / "trend").symlink_to(elsewhere)
    done = cli("trend", str(copy), cwd=tmp_path)
    assert done.returncode == 2 and "symbolic link" in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []

"""Reports: self-contained HTML, numbers that trace back to the run."""

from __future__ import annotations

import re

import orjson
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.conftest import write_config


@pytest.mark.slow
def test_report_is_self_contained_and_traces_to_the_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(
        tmp_path,
        """
        name = "rep"
        jobs = ["paired"]
        samples = 8
        run_id = "nightly-1"
        [[models]]
        provider = "simulated"
        name = "alpha"
        [[models]]
        provider = "simulated"
        name = "beta"
        [models.simulate]
        parse_error_rate = 0.2
        """,
    )
    runner = CliRunner()
    assert runner.invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "rep" / "nightly-1"
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    page = (run_dir / "report" / "report.html").read_text()
    md = (run_dir / "report" / "report.md").read_text()
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    # Opens with no network: nothing is fetched from anywhere.
    assert not re.search(r"""(src|href)=["']?https?:""", page)
    assert page.count("<svg") == 1 + 2 * 6  # forest plot + a distribution per experiment x model
    for text in (page, md):
        assert "rep / nightly-1" in text and manifest["plan"]["hash"] in text
        for key, label in manifest["models"].items():
            assert f"{label} [{key}]" in text
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    assert summary["run"]["runId"] == "nightly-1" and len(summary["effects"]) == 12
    beta = [e for e in summary["effects"] if e["model"] == "simulated/beta"]
    assert any(e["flags"] for e in beta)  # its parse failures are reported, not hidden
    for e in beta:
        assert f"{e['n_valid_0']} / {e['n_valid_1']}" in md
    assert (run_dir / "report" / "forest.png").stat().st_size > 1000
    # the seed-000 study's departures from its spec are named, with their reasons; studies with
    # no job in this run say nothing
    deviations = md.split("## Deviations from the seed-000 benchmark spec", 1)[1].split("\n## ", 1)[
        0
    ]
    assert (
        "deterministicMinimumSamplesPerCondition" in deviations
        and "attraction effect" in deviations
    )
    assert "| deviation | why |" in deviations and "Deviations from the seed-001" not in md
    assert "<h2>Deviations from the seed-000 benchmark spec</h2>" in page


def test_analyze_without_results_says_what_to_do(tmp_path):
    result = CliRunner().invoke(app, ["analyze", str(tmp_path)])
    assert result.exit_code == 2 and "not a run directory" in " ".join(result.output.split())


def test_each_study_names_its_departures_from_its_seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(
        tmp_path,
        """
        name = "dev"
        jobs = ["bias-strength", "judge-history"]
        samples = 3
        strategies = ["baseline"]
        [[models]]
        provider = "simulated"
        name = "alpha"
        temperature = 1.0
        """,
    )
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "dev" / "default"
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    md = (run_dir / "report" / "report.md").read_text()
    sections = {s.split("\n", 1)[0]: s for s in md.split("\n## ")[1:]}
    bsi = sections["Deviations from the seed-001 paper (BSI)"]
    for text in ("attraction effect", "random-slope model", "CR2", "gain frame", "unknown (not 0)"):
        assert text in bsi
    judge = sections["Deviations from the seed-002 preregistration"]
    for text in ("over all tasks", "gold-signed pull", "t-interval", "published scorer"):
        assert text in judge
    assert "Deviations from the seed-000 benchmark spec" not in sections

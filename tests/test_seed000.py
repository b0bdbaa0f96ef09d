"""The seed-000 job read in its published format, and export back to its result schema."""
from __future__ import annotations

import json
from collections import Counter

import jsonschema
import orjson
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.spec.jobs import load_job
from tests.conftest import ROOT, write_config

SCHEMA = json.loads((ROOT / "tests" / "data" / "ai-benchmark-results.schema.json").read_text())


def test_contracts_are_inferred_from_the_published_prompts():
    job = load_job(ROOT / "jobs" / "ai-bias-benchmark.json")
    kinds = {e.slug: [c.variants[0].contract for c in e.conditions] for e in job.experiments}
    assert [c.kind for c in kinds["anchoring-first-number"]] == ["number", "number"]
    assert [(c.kind, c.minimum, c.maximum) for c in kinds["framing-survival-mortality"]] == [("rating", 1, 7)] * 2
    decoy = kinds["decoy-subscription-choice"]
    assert decoy[0].options == ("Basic — €8/month, 40 GB", "Pro — €14/month, 100 GB")
    assert decoy[1].options == ("Basic — €8/month, 40 GB", "Plus — €14/month, 60 GB", "Pro — €14/month, 100 GB")
    assert kinds["escalation-past-investment"][0].options == ("Continue", "Stop")
    assert job.min_samples == 20 and job.system_prompt.startswith("Answer the task directly.")


def test_export_validates_against_the_published_schema_one_file_per_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(tmp_path, f"""
        name = "e"
        jobs = ["ai-bias-benchmark"]
        samples = 3
        output_dir = "{tmp_path / 'runs'}"
        [[models]]
        provider = "simulated"
        name = "one"
        [models.simulate]
        parse_error_rate = 0.2
        [[models]]
        provider = "simulated"
        name = "two"
        temperature = 0.0
        """)
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "e" / "default"
    result = CliRunner().invoke(app, ["export", str(run_dir), "--format", "ai-benchmark"])
    assert result.exit_code == 0, result.output
    files = sorted((run_dir / "export" / "ai-benchmark").glob("*.ndjson"))
    assert len(files) == 2
    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    for path in files:
        records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        assert len(records) == 36
        for rec in records:
            validator.validate(rec)
            assert rec["caseId"] == f"{rec['experimentSlug']}:{rec['conditionIndex']}"
        assert Counter(r["sample"] for r in records) == {1: 12, 2: 12, 3: 12}
        assert len({r["model"]["name"] for r in records}) == 1


def test_the_report_says_which_p_values_are_unadjusted_and_how_shares_are_tested(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(tmp_path, f"""
        name = "n"
        jobs = ["ai-bias-benchmark"]
        samples = 4
        output_dir = "{tmp_path / 'runs'}"
        [[models]]
        provider = "simulated"
        name = "one"
        temperature = 1.0
        """)
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "n" / "default"
    shown = CliRunner().invoke(app, ["analyze", str(run_dir)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    caption = " ".join(shown.output.split())
    assert "p: unadjusted (no correction across experiments or models)" in caption
    assert "pooled two-proportion z-test for shares, beside Newcombe's CI" in caption
    assert CliRunner().invoke(app, ["report", str(run_dir)]).exit_code == 0
    text = (run_dir / "report" / "report.md").read_text()
    note = text.split("## Effects", 1)[1].strip().split("\n\n", 1)[0]
    assert "Every p-value is unadjusted" in note and "no correction for multiplicity" in note
    assert "Newcombe's 95% interval" in note and "pooled two-proportion z-test" in note
    # six p-values, one per experiment: the chance a null table shows some p < 0.05 is said
    assert "With 6 p-values here" in note and "1 - 0.95^6 = 26%" in note


def test_the_shares_p_and_ci_can_disagree_as_the_note_warns():
    """4/20 vs 0/20: the pooled z-test gives p = 0.035, yet Newcombe's interval includes 0."""
    from orchestrator.analysis.stats import newcombe
    _, low, high, p = newcombe(4, 20, 0, 20)
    assert p < 0.05 and low < 0 < high

"""The seed-000 job read in its published format, and export back to its result schema."""

from __future__ import annotations

import json
from collections import Counter

import jsonschema
import orjson
import pytest
from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.session import load_job
from tests.conftest import ROOT, write_config

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "ai-benchmark-results.schema.json").read_text())


def test_contracts_are_inferred_from_the_published_prompts():
    job = load_job(ROOT / "jobs" / "paired.json")
    kinds = {e.slug: [c.variants[0].contract for c in e.conditions] for e in job.experiments}
    assert [c.kind for c in kinds["anchoring-first-number"]] == ["number", "number"]
    assert [(c.kind, c.minimum, c.maximum) for c in kinds["framing-survival-mortality"]] == [
        ("rating", 1, 7)
    ] * 2
    decoy = kinds["decoy-subscription-choice"]
    assert decoy[0].options == ("Basic — €8/month, 40 GB", "Pro — €14/month, 100 GB")
    assert decoy[1].options == (
        "Basic — €8/month, 40 GB",
        "Plus — €14/month, 60 GB",
        "Pro — €14/month, 100 GB",
    )
    assert kinds["escalation-past-investment"][0].options == ("Continue", "Stop")
    assert job.min_samples == 20 and job.system_prompt.startswith("Answer the task directly.")


def test_export_validates_against_the_published_schema_one_file_per_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(
        tmp_path,
        f"""
        name = "e"
        jobs = ["paired"]
        samples = 3
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "one"
        [models.simulate]
        parse_error_rate = 0.2
        [[models]]
        provider = "simulated"
        name = "two"
        temperature = 0.0
        """,
    )
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


def test_the_report_says_which_p_values_are_unadjusted_and_how_shares_are_tested(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(
        tmp_path,
        f"""
        name = "n"
        jobs = ["paired"]
        samples = 4
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "one"
        temperature = 1.0
        """,
    )
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


def test_a_decoy_menu_of_three_beside_two_is_also_read_among_the_options_both_list(
    tmp_path, monkeypatch
):
    """The Pro share falls from 1/2 to 1/3 when a third option is merely added (the respondent
    picks at random): the spec's share difference calls that -0.17, though the decoy moved nothing
    between Basic and Pro. The attraction effect (Pro among Basic-or-Pro) is ~0, and recounted
    here from the results file."""
    monkeypatch.chdir(tmp_path)
    cfg = write_config(
        tmp_path,
        f"""
        name = "d"
        jobs = ["paired"]
        samples = 1500
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "random"
        temperature = 1.0
        """,
    )
    run_dir = tmp_path / "runs" / "d" / "default"
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    analyzed = CliRunner().invoke(app, ["analyze", str(run_dir)])
    assert analyzed.exit_code == 0, analyzed.output
    rows = json.loads((run_dir / "summary.json").read_text())["effects"]
    decoy = next(r for r in rows if r["experimentSlug"] == "decoy-subscription-choice")
    pro, basic = "Pro — €14/month, 100 GB", "Basic — €8/month, 40 GB"
    picks = {0: Counter(), 1: Counter()}
    for line in (run_dir / "results.ndjson").read_bytes().splitlines():
        rec = orjson.loads(line)
        if rec["experimentSlug"] == "decoy-subscription-choice" and rec["status"] == "ok":
            picks[rec["conditionIndex"]][rec["response"]["choice"]] += 1
    among = {c: picks[c][pro] / (picks[c][pro] + picks[c][basic]) for c in (0, 1)}
    assert decoy["attraction_effect"] == pytest.approx(among[1] - among[0], abs=1e-12)
    assert abs(decoy["attraction_effect"]) < 0.06  # 3.5 SE of the difference at these counts
    shared = [picks[c][pro] + picks[c][basic] for c in (0, 1)]
    _, p = proportions_ztest([picks[1][pro], picks[0][pro]], [shared[1], shared[0]])
    low, high = confint_proportions_2indep(
        picks[1][pro], shared[1], picks[0][pro], shared[0], method="newcomb"
    )
    assert (decoy["attraction_ci_low"], decoy["attraction_ci_high"]) == (
        pytest.approx(low),
        pytest.approx(high),
    )
    assert decoy["attraction_p"] == pytest.approx(p)
    assert decoy["effect"] == pytest.approx(
        picks[1][pro] / sum(picks[1].values()) - picks[0][pro] / sum(picks[0].values()), abs=1e-12
    )
    assert decoy["effect"] < -0.12  # the option count alone: 1/3 - 1/2
    assert any("among the options both list" in f for f in decoy["flags"])
    others = [r for r in rows if r["experimentSlug"] != "decoy-subscription-choice"]
    assert all(r["attraction_effect"] is None for r in others)


def test_the_export_parses_only_each_tasks_final_record(tmp_path, monkeypatch):
    """The final records are found through the columnar snapshot (the log is not scanned
    line by line again) and only they are parsed: a duplicate terminal line, a failed attempt
    before an answer and a failed attempt after one are left out."""
    import orchestrator.export as export
    from orchestrator.engine.results import ResultLines

    monkeypatch.chdir(tmp_path)
    cfg = write_config(
        tmp_path,
        f"""
        name = "e"
        jobs = ["paired"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "one"
        temperature = 1.0
        """,
    )
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "e" / "default"
    log = run_dir / "results.ndjson"
    lines = log.read_bytes().splitlines(keepends=True)
    first, second = orjson.loads(lines[0]), orjson.loads(lines[1])
    failed = second | {"status": "failed", "response": None, "error": "timeout"}
    log.write_bytes(
        orjson.dumps(failed)
        + b"\n"  # a failed attempt before the task's answer
        + b"".join(lines)
        + lines[0].replace(b'"raw":"', b'"raw":"again: ', 1)  # a duplicate terminal line
        + orjson.dumps(first | {"status": "failed", "response": None})
        + b"\n"  # and a retry
    )
    parsed = []
    parse = export._parse
    monkeypatch.setattr(export, "_parse", lambda p, line: parsed.append(1) or parse(p, line))
    monkeypatch.setattr(ResultLines, "records", lambda self: pytest.fail("scanned the log"))
    result = CliRunner().invoke(app, ["export", str(run_dir), "--format", "ai-benchmark"])
    assert result.exit_code == 0, result.output
    (path,) = (run_dir / "export" / "ai-benchmark").glob("*.ndjson")
    exported = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert len(exported) == len(parsed) == len(lines) == 24
    by_case = {(r["caseId"], r["sample"]): r for r in exported}
    assert (
        by_case[(first["caseId"], first["sample"])]["response"]["raw"] == first["response"]["raw"]
    )

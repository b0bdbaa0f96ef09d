"""Analysis of runs: planted effects recovered, the published scorer's numbers, honest flags."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats
from typer.testing import CliRunner

from orchestrator.analysis.summary import analyze
from orchestrator.cli import app
from tests.conftest import run_quietly, write_config

PRO = "Pro — €14/month, 100 GB"
EFFECTS = f"""
[models.simulate.effects.anchoring-first-number]
conditions = [{{mean = 1150, sd = 120}}, {{mean = 880, sd = 120}}]
[models.simulate.effects.framing-survival-mortality]
conditions = [{{mean = 5.2, sd = 1.1}}, {{mean = 4.1, sd = 1.3}}]
[models.simulate.effects.decoy-subscription-choice]
conditions = [{{shares = {{"{PRO}" = 0.45}}}}, {{shares = {{"{PRO}" = 0.70}}}}]
[models.simulate.effects.escalation-past-investment]
conditions = [{{shares = {{"Continue" = 0.6}}}}, {{shares = {{"Continue" = 0.6}}}}]
"""


def rating_mean(mu: float, sd: float, lo: int = 1, hi: int = 7) -> float:
    """E[clip(round(X), lo, hi)] for X ~ Normal(mu, sd): what the simulated rater answers on average."""
    edges = np.arange(lo + 0.5, hi, 1.0)
    cdf = stats.norm.cdf(edges, mu, sd)
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    return float(np.dot(np.arange(lo, hi + 1), probs))


PLANTED = {
    "anchoring-first-number": 1150 - 880,
    "framing-survival-mortality": rating_mean(5.2, 1.1) - rating_mean(4.1, 1.3),
    "decoy-subscription-choice": 0.70 - 0.45,
    "escalation-past-investment": 0.0,
    "outcome-bias-supplier-decision": 0.0,
    "planning-fallacy-reference-class": 0.0,
}


def _campaign(tmp_path: Path, replications: int, samples: int = 20, extra: str = "") -> Path:
    models = "".join(
        f"""
[[models]]
provider = "simulated"
name = "sim"
[models.simulate]
seed = {i}
{extra}
{EFFECTS.replace("models.simulate", "models.simulate")}
"""
        for i in range(replications)
    )
    return write_config(
        tmp_path,
        f"""
name = "planted"
jobs = ["paired"]
samples = {samples}
output_dir = "{tmp_path / "runs"}"
[limits.simulated]
max_in_flight = 64
{models}""",
    )


@pytest.mark.slow
def test_planted_effects_are_covered_by_the_95_percent_ci_in_200_replications(tmp_path):
    outcome = run_quietly(_campaign(tmp_path, 200))
    summary = analyze(outcome.run_dir).tables["summary"]
    assert summary.height == 200 * 6
    for exp, planted in PLANTED.items():
        rows = summary.filter(pl.col("experimentSlug") == exp)
        covered = ((rows["ci_low"] <= planted) & (planted <= rows["ci_high"])).mean()
        assert covered >= 0.90, f"{exp}: the CI covered {planted:.3f} in {covered:.0%} of 200"
        assert abs(rows["effect"].mean() - planted) < 0.1 * max(1.0, abs(planted)), exp


def test_effects_equal_an_independent_scorer_over_the_exported_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outcome = run_quietly(_campaign(tmp_path, 1, samples=25, extra="parse_error_rate = 0.1"))
    summary = analyze(outcome.run_dir).tables["summary"]
    assert CliRunner().invoke(app, ["export", str(outcome.run_dir)]).exit_code == 0
    [exported] = (outcome.run_dir / "export" / "ai-benchmark").glob("*.ndjson")
    spec = orjson.loads((Path(__file__).parents[1] / "jobs" / "paired.json").read_bytes())
    answers = defaultdict(list)
    for line in exported.read_bytes().splitlines():
        rec = orjson.loads(line)
        answers[rec["caseId"]].append(rec["response"])
    for exp in spec["experiments"]:
        metric, slug = exp["metric"], exp["experimentSlug"]
        if metric["type"] == "mean-difference":
            score = [
                np.mean([r["value"] for r in answers[f"{slug}:{i}"] if "value" in r])
                for i in (0, 1)
            ]
        else:
            score = [
                np.mean(
                    [
                        r["choice"] == metric["targetOption"]
                        for r in answers[f"{slug}:{i}"]
                        if "choice" in r
                    ]
                )
                for i in (0, 1)
            ]
        expected = (
            score[0] - score[1]
            if metric["direction"] == "condition0-minus-condition1"
            else score[1] - score[0]
        )
        row = summary.filter(pl.col("experimentSlug") == slug).row(0, named=True)
        assert row["effect"] == pytest.approx(expected, rel=1e-12, abs=1e-12), slug
        assert (row["stat_0"], row["stat_1"]) == (pytest.approx(score[0]), pytest.approx(score[1]))


def test_parse_failures_missing_conditions_and_small_samples_are_flagged(tmp_path):
    outcome = run_quietly(_campaign(tmp_path, 1, samples=6, extra="parse_error_rate = 0.3"))
    results = outcome.run_dir / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(
        b"".join(l for l in lines if b'"caseId":"anchoring-first-number:1"' not in l)
    )
    summary = analyze(outcome.run_dir).tables["summary"]
    rows = {r["experimentSlug"]: r for r in summary.iter_rows(named=True)}
    anchoring = rows.pop("anchoring-first-number")
    assert anchoring["effect"] is None and anchoring["n_valid_1"] == 0
    assert "no valid answers in condition 1" in anchoring["flags"]
    assert "unfinished c1: 0/6 answered" in anchoring["flags"]
    for row in rows.values():
        assert not row["adequate"]
        assert any(f.startswith("valid n below the spec's minimum") for f in row["flags"])
        errors = row["n_parse_error_0"] + row["n_parse_error_1"]
        assert errors == 0 or any(f.startswith("parse errors") for f in row["flags"])
        assert row["n_valid_0"] + row["n_parse_error_0"] == 6
    assert sum(r["n_parse_error_0"] + r["n_parse_error_1"] for r in rows.values()) > 0

"""Extreme numeric answers (issue 29, item 12), the job format and the bias-strength study: a
job's `plausibleRange` is checked when the job is read, and the anchoring variants of the Bias
Strength Index get a robust BSI, the dominated-mean flag and the implausible count beside the
paper's BSI (tests/test_extreme_answers.py has the statistics and the paired study)."""

from __future__ import annotations

import json

import numpy as np
import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from orchestrator.analysis.summary import analyze
from orchestrator.cli import app
from tests.conftest import ROOT, run_quietly, write_config

RUNAWAY = 1.5e22


# --- the job format ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("experiment", "value", "said"),
    [
        (0, [5000, 10], "low < high"),
        (0, [10], "a list of two numbers"),
        (0, "0-100000", "a list of two numbers"),
        (0, [0, "lots"], "a list of two numbers"),
        (0, [True, 5], "a list of two numbers"),
        (2, [0, 1], "number only"),  # the decoy: a choice
    ],
)
def test_a_bad_plausible_range_is_refused_naming_file_and_field(
    tmp_path, monkeypatch, experiment, value, said
):
    monkeypatch.chdir(tmp_path)
    spec = json.loads((ROOT / "jobs" / "paired.json").read_text(encoding="utf-8"))
    spec["experiments"][experiment]["plausibleRange"] = value
    (tmp_path / "job.json").write_text(json.dumps(spec), encoding="utf-8")
    config = write_config(
        tmp_path,
        f'name = "bad"\njobs = ["job.json"]\noutput_dir = "{tmp_path / "runs"}"\n'
        '[[models]]\nprovider = "simulated"\nname = "m"\n',
    )
    result = CliRunner().invoke(app, ["plan", str(config)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "job.json" in flat and f"experiments[{experiment}].plausibleRange" in flat
    assert said in flat and "fix:" in flat and "Traceback" not in flat


def test_the_manifest_keeps_the_range_and_refuses_a_reversed_one():
    from orchestrator.spec.models import ResponseContract, Variant

    contract = ResponseContract(kind="number")
    assert Variant(id="v", prompt="p", contract=contract, plausible_range=(0, 9)).plausible_range
    with pytest.raises(ValueError, match="low < high"):
        Variant(id="v", prompt="p", contract=contract, plausible_range=(9, 0))


# --- bias-strength: the anchoring variants -----------------------------------------------------


def test_bias_strength_gives_a_robust_bsi_beside_a_runaway_one(tmp_path):
    spec = json.loads((ROOT / "tests" / "data" / "three-biases.json").read_text())
    spec["biases"] = [b for b in spec["biases"] if b["slug"] == "anchoring"]
    spec["biases"][0]["variants"][0]["plausibleRange"] = [0, 10_000]
    job = tmp_path / "numbers.json"
    job.write_text(json.dumps(spec))
    config = write_config(
        tmp_path,
        f"""
name = "runaway-bsi"
jobs = ["{job}"]
samples = 40
strategies = ["baseline"]
output_dir = "{tmp_path / "runs"}"
[[models]]
provider = "simulated"
name = "sim"
temperature = 0.7
[models.simulate.effects.anchoring]
conditions = [{{mean = 100, sd = 30}}, {{mean = 300, sd = 30}}]
""",
    )
    run_dir = run_quietly(config).run_dir
    path = run_dir / "results.ndjson"
    recs = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    hit = next(i for i, r in enumerate(recs) if r["variant"] == "a1" and r["conditionIndex"] == 1)
    recs[hit]["response"]["value"] = RUNAWAY
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))

    tables = analyze(run_dir).tables
    variants = {r["variant"]: r for r in tables["bsi_variants"].iter_rows(named=True)}
    a1 = variants["a1"]
    assert a1["bsi_signed"] > 1e15  # the paper's BSI, kept as it is
    assert a1["hl_shift"] == pytest.approx(200, abs=25) and a1["hl_ci_low"] > 100
    assert a1["bsi_robust_signed"] == pytest.approx(200 / 800, abs=0.04)
    assert a1["dominated"] is True and a1["n_implausible"] == 1 and a1["n_implausible_T"] == 1
    for other in ("a2", "a3"):  # ordinary answers, and no range declared
        assert variants[other]["dominated"] is False and variants[other]["n_implausible"] is None
    [bias] = tables["bsi_summary"].iter_rows(named=True)
    assert bias["dominated_variants"] == 1 and bias["n_implausible"] == 1
    assert "a few answers dominate the mean in 1 of 3 variants (a1)" in bias["robust_note"]
    # the median of the variants' robust BSIs: a2's, with [min, max] of three at 75%
    robust = sorted(r["bsi_robust_signed"] for r in variants.values())
    assert bias["bsi_robust_signed"] == robust[1] == variants["a2"]["bsi_robust_signed"]
    assert bias["bsi_robust_signed"] == pytest.approx(200 / 1800, rel=0.15)
    assert (bias["bsi_robust_ci_low"], bias["bsi_robust_ci_high"]) == (robust[0], robust[2])
    assert (
        bias["bsi_robust_level"] == 0.75 and "at 75% (min-max; 95% needs 6)" in bias["robust_note"]
    )
    # 1.5e22 / 40 answers over 800: a1 carries the mean BSI as well
    assert bias["dominant_variant"] == "a1"


def _anchoring_run(tmp_path, temperature: float, runaway: bool):
    """The three anchoring variants (anchors 800, 1800, 2800 above a control of 100, a planted
    shift of 200), every valid a1 treatment answer 1.5e22 when `runaway`: at T=0 the model
    answers one draw, so a runaway answer is the whole of a1's shift."""
    spec = json.loads((ROOT / "tests" / "data" / "three-biases.json").read_text())
    spec["biases"] = [b for b in spec["biases"] if b["slug"] == "anchoring"]
    job = tmp_path / "numbers.json"
    job.write_text(json.dumps(spec))
    config = write_config(
        tmp_path,
        f"""
name = "anchoring-t{temperature}"
jobs = ["{job}"]
samples = 30
strategies = ["baseline"]
output_dir = "{tmp_path / "runs"}"
[[models]]
provider = "simulated"
name = "sim"
temperature = {temperature}
[models.simulate.effects.anchoring]
conditions = [{{mean = 100, sd = 30}}, {{mean = 300, sd = 30}}]
""",
    )
    run_dir = run_quietly(config).run_dir
    if runaway:
        path = run_dir / "results.ndjson"
        recs = [orjson.loads(x) for x in path.read_bytes().splitlines()]
        for r in recs:
            if (r["variant"], r["conditionIndex"], r["status"]) == ("a1", 1, "ok"):
                r["response"]["value"] = RUNAWAY
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return run_dir


def test_at_t0_a_runaway_variant_is_flagged_and_the_median_robust_bsi_ignores_it(tmp_path):
    """Issue 29 item 12's review: at T=0, with a1's shift one runaway answer, the mean of the
    variants' robust BSIs was 6.25e18 with no flag. The median is a2's, near the planted
    200/1800, a1 is named as carrying the mean, and the interval says its 75% level."""
    from orchestrator.studies.bias_strength.report import _bsi_rows
    from orchestrator.studies.bias_strength.robust import robust_cell

    run_dir = _anchoring_run(tmp_path, 0.0, runaway=True)
    tables = analyze(run_dir).tables
    variants = {r["variant"]: r for r in tables["bsi_variants"].iter_rows(named=True)}
    assert variants["a1"]["bsi_robust_signed"] > 1e18  # a1's own shift is the runaway answer
    assert all(r["dominated"] is None for r in variants.values())  # T=0: no per-variant rule
    [bias] = tables["bsi_summary"].iter_rows(named=True)
    assert bias["bsi_signed"] > 1e18  # the paper's mean, kept
    others = [variants[v]["bsi_robust_signed"] for v in ("a2", "a3")]
    assert min(others) <= bias["bsi_robust_signed"] <= max(others)
    assert bias["bsi_robust_signed"] == pytest.approx(200 / 1800, rel=0.2)
    assert bias["bsi_robust_level"] == 0.75
    assert bias["bsi_robust_ci_high"] == variants["a1"]["bsi_robust_signed"]
    assert bias["dominant_variant"] == "a1"
    assert bias["bsi_signed_without_dominant"] == pytest.approx(
        np.mean([variants[v]["bsi_signed"] for v in ("a2", "a3")])
    )
    note = bias["robust_note"]
    assert "variant a1 dominates the mean signed BSI" in note and "at 75%" in note
    [row] = _bsi_rows(tables["bsi_summary"])
    assert row["signed BSI"].endswith(" †")
    assert row["robust signed BSI (HL, median) [CI]"] == robust_cell(bias)
    assert robust_cell(bias).endswith("(75%)")
    # compare's effects: flagged, the median without its 75% interval (read there as 95%)
    from orchestrator.nightly.effects import run_effects

    [effect] = (
        run_effects(run_dir)
        .effects.filter(pl.col("study") == "bias-strength")
        .iter_rows(named=True)
    )
    assert effect["dominated"] is True and effect["robust"] == bias["bsi_robust_signed"]
    assert effect["robust_low"] is None and effect["robust_high"] is None


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_ordinary_anchoring_variants_raise_no_flag(tmp_path, temperature):
    tables = analyze(_anchoring_run(tmp_path, temperature, runaway=False)).tables
    [bias] = tables["bsi_summary"].iter_rows(named=True)
    assert bias["dominant_variant"] is None and bias["bsi_signed_without_dominant"] is None
    assert bias["dominated_variants"] == (None if temperature == 0 else 0)
    assert bias["bsi_robust_signed"] == pytest.approx(200 / 1800, rel=0.2)
    assert "dominate" not in bias["robust_note"] and "at 75%" in bias["robust_note"]


def test_the_variant_rule_and_the_median_interval():
    from orchestrator.studies.bias_strength.robust import dominant_variant, robust_interval

    names = ["a1", "a2", "a3"]
    # ordinary wordings (anchors 800, 1800, 2800 away), BSIs far beyond 1 that differ by a
    # share of their size, a model answering 2000 whatever the anchor: no variant carries it
    for ordinary in ([0.25, 0.11, 0.075], [-0.3, 0.1, 0.4], [10.0, 11.0, 13.0], [2.4, 1.06, 0.68]):
        assert dominant_variant(names, np.array(ordinary))[0] is None, ordinary
    assert dominant_variant(names, np.array([1.87e19, 0.108, 0.0755]))[0] == "a1"
    assert dominant_variant(names, np.array([0.1, 4.0, 0.05])) == ("a2", pytest.approx(0.075))
    assert dominant_variant(names, np.array([0.1, 3.0, 0.05]))[0] is None  # a move of 0.975
    assert dominant_variant(names[:2], np.array([1e19, 0.1])) == (
        None,
        pytest.approx(np.nan, nan_ok=True),
    )
    # [min, max] below 6 variants at its own level; 95% from 6 on
    for k, level in ((2, 0.5), (3, 0.75), (4, 0.875), (5, 0.9375)):
        assert robust_interval(np.arange(k, dtype=float)) == (0.0, k - 1.0, level)
    low, high, level = robust_interval(np.arange(6, dtype=float))
    assert (low, high) == (0.0, 5.0) and level == pytest.approx(1 - 2 / 64)
    low, high, level = robust_interval(np.arange(20, dtype=float))
    assert (low, high) == (5.0, 14.0) and level >= 0.95
    assert np.isnan(robust_interval(np.array([0.3]))).all()


def test_bias_strength_refuses_a_plausible_range_on_a_choice(tmp_path):
    from orchestrator.errors import UserError
    from orchestrator.session import load_job

    spec = json.loads((ROOT / "tests" / "data" / "three-biases.json").read_text())
    spec["biases"][0]["variants"][1]["plausibleRange"] = [0, 1]
    job = tmp_path / "job.json"
    job.write_text(json.dumps(spec))
    with pytest.raises(UserError) as caught:
        load_job(job)
    assert caught.value.field == "biases[0].variants[1].plausibleRange"
    assert caught.value.file == str(job) and "number only" in str(caught.value)

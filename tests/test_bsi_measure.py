"""What the 11-bias study's numbers mean: the decoy's attraction measure, models told apart by
identity, debiasing reductions with uncertainty, sigma_sys for K < 2, and the report's figures
read back from what they drew."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import orjson
import polars as pl
import pytest

from orchestrator.analysis.summary import analyze
from orchestrator.studies.bias_strength.bootstrap import bootstrap_sigma
from orchestrator.studies.bias_strength.debiasing import debiasing
from tests.conftest import ROOT, run_quietly, write_config

STRATEGIES = ("baseline", "cot", "warning", "analyst")


def _job_of(tmp_path, slugs: tuple[str, ...], name: str = "job.json"):
    """The built-in eleven-biases job cut down to some of its biases (same format, same prompts)."""
    job = json.loads((ROOT / "jobs" / "eleven-biases.json").read_text())
    job["biases"] = [b for b in job["biases"] if b["slug"] in slugs]
    path = tmp_path / name
    path.write_text(json.dumps(job))
    return path


def _records(run_dir):
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


def test_a_respondent_with_no_bias_and_a_first_position_habit_shows_no_decoy_effect(tmp_path):
    """The control shows target and competitor, the treatment adds the decoy. Picking at random
    (or whatever is listed first, orders counterbalanced) gives the target 1/2 of the answers in
    the control and 1/3 in the treatment: the option count alone, not an attraction effect."""
    cfg = write_config(tmp_path, f"""
        name = "null-decoy"
        jobs = ["{_job_of(tmp_path, ('decoy',))}"]
        samples = 60
        output_dir = "{tmp_path / 'runs'}"
        [[models]]
        provider = "simulated"
        name = "first-picker"
        [models.simulate]
        first_position_bias = 0.8
        """)
    outcome = run_quietly(cfg)
    tables = analyze(outcome.run_dir).tables
    summary = tables["bsi_summary"]
    assert sorted(summary["strategy"]) == sorted(STRATEGIES)
    for r in summary.iter_rows(named=True):
        called = [name for name in ("significant_variant", "significant_mixed") if r[name]]
        assert not called, f"{r['strategy']}: a respondent with no decoy effect called biased ({called})"
        assert abs(r["bsi_signed"]) < 0.15, r  # option count alone gave -0.17
        assert 0.25 < r["extra_share_T"] < 0.42  # the decoy drew its 1/3, counted apart
    # The measure's counts, recounted from the results file: the target among target-or-competitor
    # answers, decoy answers apart.
    ok = [r for r in _records(outcome.run_dir) if r["status"] == "ok"]
    roles = Counter((r["strategy"], r["variant"], r["conditionIndex"], r["response"]["role"]) for r in ok)
    first = np.mean([r["response"]["role"] == r["optionOrder"][0] for r in ok])
    assert first > 0.8  # the habit is there (0.8 + 0.2 x chance): what counterbalancing must cancel
    variants = tables["bsi_variants"]
    for v in variants.iter_rows(named=True):
        got = {c: roles[(v["strategy"], v["variant"], i, "target")] for i, c in enumerate("CT")}
        shown = {c: got[c] + roles[(v["strategy"], v["variant"], i, "competitor")] for i, c in enumerate("CT")}
        assert (v["k_C"], v["n_C"], v["k_T"], v["n_T"]) == (got["C"], shown["C"], got["T"], shown["T"])
        assert v["n_extra_C"] == 0 and v["n_extra_T"] == roles[(v["strategy"], v["variant"], 1, "decoy")]
        assert v["bsi_signed"] == got["T"] / shown["T"] - got["C"] / shown["C"]


# --- uncertainty: numeric bootstrap, debiasing reductions ----------------------------------------

def test_numeric_sigma_stat_resamples_both_conditions():
    """sigma_stat of (mean_T - mean_C) / (anchor - mean_C) against the delta method with the
    samples' own moments (what the bootstrap resamples from). Control and treatment each carry a
    large share of the variance, so resampling one of them alone misses by 25% or more."""
    rng = np.random.default_rng(7)
    settings = [(100, 50, 200, 30, 500), (50, 40, 150, 40, 400), (300, 30, 350, 40, 900)]
    rows = []
    for m_c, s_c, m_t, s_t, anchor in settings:
        values_c, values_t = rng.normal(m_c, s_c, 200), rng.normal(m_t, s_t, 250)
        rows.append({"kind": "number", "n_C": 200, "n_T": 250, "k_C": 0, "k_T": 0, "anchor": float(anchor),
                     "values_C": values_c.tolist(), "values_T": values_t.tolist()})
    wide = pl.DataFrame(rows)
    sigma = bootstrap_sigma(wide, seed=3)
    for r, got in zip(rows, sigma, strict=True):
        c, t = np.asarray(r["values_C"]), np.asarray(r["values_T"])
        e = r["anchor"] - c.mean()
        var_t = t.var() / len(t) / e**2  # d BSI / d mean_T = 1 / e
        var_c = c.var() / len(c) * (r["anchor"] - t.mean()) ** 2 / e**4  # d BSI / d mean_C
        assert min(var_t, var_c) > 0.25 * (var_t + var_c)  # either arm alone is far off
        assert got == pytest.approx(np.sqrt(var_t + var_c), rel=0.04)


def _arms(rng, reps: int, n: int, p_c, effects: dict[str, list[float]]) -> pl.DataFrame:
    """Variant rows of `reps` independent replications (one model each) of one choice bias with
    K variants; each strategy's treatment share is p_c + its effect. Counts drawn with numpy."""
    p_c, frames = np.asarray(p_c), []
    k = len(p_c)
    for strategy, effect in effects.items():
        k_c = rng.binomial(n, p_c, (reps, k))
        k_t = rng.binomial(n, p_c + np.asarray(effect), (reps, k))
        signed = (k_t - k_c).ravel() / n
        frames.append(pl.DataFrame({
            "modelKey": np.repeat([f"r{i}" for i in range(reps)], k), "model": np.repeat([f"r{i}" for i in range(reps)], k),
            "experimentSlug": "b", "bias": "b", "strategy": strategy, "variant": np.tile([f"v{j}" for j in range(k)], reps),
            "kind": "choice", "k_C": k_c.ravel(), "n_C": n, "k_T": k_t.ravel(), "n_T": n,
            "bsi_signed": signed, "bsi": np.abs(signed), "anchor": None, "values_C": None, "values_T": None},
            schema_overrides={"anchor": pl.Float64, "values_C": pl.List(pl.Float64), "values_T": pl.List(pl.Float64)}))
    return pl.concat(frames)


P_C, PLANTED = [0.4, 0.5, 0.3, 0.6], [0.3, 0.1, 0.2, 0.0]


def test_debiasing_ci_covers_zero_when_the_strategy_changes_nothing():
    """The strategy arm is the baseline again (same planted effects, fresh noise): the 95% CI of
    the difference must cover 0 in >= 93% of 600 replications (a 90% interval fails this with
    probability < 0.1%), and be as wide as the sampling noise of both arms."""
    reps, n = 600, 100
    table = debiasing(_arms(np.random.default_rng(11), reps, n, P_C, {"baseline": PLANTED, "cot": PLANTED}),
                      seed=5, resamples=1000)
    assert table.height == reps
    covered = (table["diff_ci_low"] <= 0) & (table["diff_ci_high"] >= 0)
    covered_signed = (table["signed_ci_low"] <= 0) & (table["signed_ci_high"] >= 0)
    assert covered.mean() >= 0.93 and covered_signed.mean() >= 0.93
    assert (~table["ci_excludes_zero"]).mean() == covered.mean()
    # signed difference: SE from the binomial variances of 2 arms x 2 conditions x K variants
    p_t = np.asarray(P_C) + np.asarray(PLANTED)
    se = np.sqrt(2 * np.sum(np.asarray(P_C) * (1 - np.asarray(P_C)) / n + p_t * (1 - p_t) / n)) / len(P_C)
    width = (table["signed_ci_high"] - table["signed_ci_low"]).mean()
    assert width == pytest.approx(2 * 1.96 * se, rel=0.08)
    # the noise the CI is there for: reductions printed from noise alone
    assert table["reduction"].min() < -0.2 and table["reduction"].max() > 0.2


def test_debiasing_detects_a_planted_reduction_with_the_right_sign():
    """Strategy 'cot' cuts every variant's effect to a third, 'warning' raises it by 0.2: the
    difference is strategy - baseline, the reduction 1 - BSI_strategy / BSI_baseline."""
    reps, p_c, planted = 300, [0.2, 0.3, 0.25, 0.2], [0.4, 0.3, 0.35, 0.25]
    frame = _arms(np.random.default_rng(12), reps, 100, p_c,
                  {"baseline": planted, "cot": [e / 3 for e in planted], "warning": [e + 0.2 for e in planted]})
    table = debiasing(frame, seed=5, resamples=1000)
    cot, warning = (table.filter(pl.col("strategy") == s) for s in ("cot", "warning"))
    truth = np.mean(planted)
    assert cot["signed_diff"].mean() == pytest.approx(-truth * 2 / 3, abs=0.01)
    assert warning["signed_diff"].mean() == pytest.approx(0.2, abs=0.01)
    assert cot["diff"].mean() == pytest.approx(-truth * 2 / 3, abs=0.01)  # effects far from 0: |BSI| alike
    assert cot["reduction"].median() == pytest.approx(2 / 3, abs=0.05)
    assert warning["reduction"].median() == pytest.approx(-0.2 / truth, abs=0.05)
    # detected, and on the right side of 0 (power about 99% at this size)
    assert (cot["diff_ci_high"] < 0).mean() >= 0.95 and (cot["signed_ci_high"] < 0).mean() >= 0.95
    assert (warning["diff_ci_low"] > 0).mean() >= 0.95 and cot["ci_excludes_zero"].mean() >= 0.95
    assert (cot["bsi_baseline"] == warning["bsi_baseline"]).all()

"""Debiasing reductions with their uncertainty (debiasing.py and the report's table): the signed
difference's bootstrap CI under a strategy that changes nothing and one that does, the reduction
shown only beyond noise, and temperature-0 rows without a CI."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from orchestrator.studies.bias_strength.debiasing import debiasing
from orchestrator.studies.bias_strength.report import _debias_rows


def _arms(rng, reps: int, n: int, p_c, effects: dict[str, list[float]]) -> pl.DataFrame:
    """Variant rows of `reps` independent replications (one model each) of one choice bias with
    K variants; each strategy's treatment share is p_c + its effect. Counts drawn with numpy."""
    p_c, frames = np.asarray(p_c), []
    k = len(p_c)
    for strategy, effect in effects.items():
        k_c = rng.binomial(n, p_c, (reps, k))
        k_t = rng.binomial(n, p_c + np.asarray(effect), (reps, k))
        signed = (k_t - k_c).ravel() / n
        frames.append(
            pl.DataFrame(
                {
                    "modelKey": np.repeat([f"r{i}" for i in range(reps)], k),
                    "model": np.repeat([f"r{i}" for i in range(reps)], k),
                    "experimentSlug": "b",
                    "bias": "b",
                    "strategy": strategy,
                    "variant": np.tile([f"v{j}" for j in range(k)], reps),
                    "kind": "choice",
                    "k_C": k_c.ravel(),
                    "n_C": n,
                    "k_T": k_t.ravel(),
                    "n_T": n,
                    "bsi_signed": signed,
                    "bsi": np.abs(signed),
                    "anchor": None,
                    "values_C": None,
                    "values_T": None,
                },
                schema_overrides={
                    "anchor": pl.Float64,
                    "values_C": pl.List(pl.Float64),
                    "values_T": pl.List(pl.Float64),
                },
            )
        )
    return pl.concat(frames)


P_C, PLANTED = [0.4, 0.5, 0.3, 0.6], [0.3, 0.1, 0.2, 0.0]


@pytest.mark.slow
def test_debiasing_ci_covers_zero_when_the_strategy_changes_nothing():
    """The strategy arm is the baseline again (same planted effects, fresh noise): the 95% CI of
    the signed difference must cover 0 in >= 93% of 2,000 replications (binomial SE 0.5%: a 90%
    interval fails this with probability < 1e-6), be as wide as the sampling noise of both arms,
    and be what 'CI excludes 0' reads. The |BSI| interval it replaced covers more than 95%
    (absolute values of noise cannot fall below 0): conservative, a test without power."""
    reps, n = 2000, 100
    table = debiasing(
        _arms(np.random.default_rng(11), reps, n, P_C, {"baseline": PLANTED, "cot": PLANTED}),
        seed=5,
        resamples=500,
    )
    assert table.height == reps
    covered = (table["diff_ci_low"] <= 0) & (table["diff_ci_high"] >= 0)
    covered_signed = (table["signed_ci_low"] <= 0) & (table["signed_ci_high"] >= 0)
    assert covered_signed.mean() >= 0.93
    assert covered.mean() > covered_signed.mean()
    assert ((~table["ci_excludes_zero"]) == covered_signed).all()  # the signed CI decides
    # signed difference: SE from the binomial variances of 2 arms x 2 conditions x K variants
    p_t = np.asarray(P_C) + np.asarray(PLANTED)
    se = np.sqrt(
        2 * np.sum(np.asarray(P_C) * (1 - np.asarray(P_C)) / n + p_t * (1 - p_t) / n)
    ) / len(P_C)
    width = (table["signed_ci_high"] - table["signed_ci_low"]).mean()
    assert width == pytest.approx(2 * 1.96 * se, rel=0.08)
    # the noise the CI is there for: reductions computed from noise alone, which the report withholds
    assert table["reduction"].min() < -0.2 and table["reduction"].max() > 0.2
    shown = [r["reduction"] for r in _debias_rows(table)]
    assert all(
        s == "– (within noise)"
        for s, e in zip(shown, table["ci_excludes_zero"], strict=True)
        if not e
    )
    assert all(s.endswith("%") for s, e in zip(shown, table["ci_excludes_zero"], strict=True) if e)
    assert 0.93 * reps <= shown.count("– (within noise)") < reps


def test_debiasing_at_temperature_0_gives_the_difference_without_a_ci():
    """At T=0 a variant's answers are one answer repeated: the bootstrap would resample repeats as
    if independent, so the rows keep their difference, lose the CI and the reduction, and say why."""
    frame = _arms(np.random.default_rng(3), 2, 40, P_C, {"baseline": PLANTED, "cot": [0.0] * 4})
    frame = frame.with_columns(deterministic=pl.col("modelKey") == "r0")
    table = debiasing(frame, seed=5, resamples=200).sort("modelKey")
    cold, warm = table.row(0, named=True), table.row(1, named=True)
    assert cold["deterministic"] and not warm["deterministic"]
    signed = (
        frame.filter(pl.col("modelKey") == "r0")
        .group_by("strategy")
        .agg(pl.col("bsi_signed").mean())
    )
    means = dict(signed.iter_rows())
    assert cold["signed_diff"] == pytest.approx(means["cot"] - means["baseline"], abs=1e-12)
    assert all(
        cold[c] is None
        for c in ("signed_ci_low", "signed_ci_high", "diff_ci_low", "ci_excludes_zero")
    )
    assert warm["signed_ci_low"] < warm["signed_diff"] < warm["signed_ci_high"]
    rows = _debias_rows(table.sort("modelKey"))
    assert (
        rows[0]["reduction"] == "– (T=0, no CI)"
        and "T=0" in rows[0]["notes"]
        and "[" not in rows[0]["Δ signed BSI [95% CI]"]
    )
    assert "T=0" not in rows[1]["notes"] and "[" in rows[1]["Δ signed BSI [95% CI]"]


def test_debiasing_detects_a_planted_reduction_with_the_right_sign():
    """Strategy 'cot' cuts every variant's effect to a third, 'warning' raises it by 0.2: the
    difference is strategy - baseline, the reduction 1 - BSI_strategy / BSI_baseline."""
    reps, p_c, planted = 300, [0.2, 0.3, 0.25, 0.2], [0.4, 0.3, 0.35, 0.25]
    frame = _arms(
        np.random.default_rng(12),
        reps,
        100,
        p_c,
        {
            "baseline": planted,
            "cot": [e / 3 for e in planted],
            "warning": [e + 0.2 for e in planted],
        },
    )
    table = debiasing(frame, seed=5, resamples=1000)
    cot, warning = (table.filter(pl.col("strategy") == s) for s in ("cot", "warning"))
    truth = np.mean(planted)
    assert cot["signed_diff"].mean() == pytest.approx(-truth * 2 / 3, abs=0.01)
    assert warning["signed_diff"].mean() == pytest.approx(0.2, abs=0.01)
    assert cot["diff"].mean() == pytest.approx(
        -truth * 2 / 3, abs=0.01
    )  # effects far from 0: |BSI| alike
    assert cot["reduction"].median() == pytest.approx(2 / 3, abs=0.05)
    assert warning["reduction"].median() == pytest.approx(-0.2 / truth, abs=0.05)
    # detected, and on the right side of 0 (power about 99% at this size)
    assert (cot["diff_ci_high"] < 0).mean() >= 0.95 and (cot["signed_ci_high"] < 0).mean() >= 0.95
    assert (warning["diff_ci_low"] > 0).mean() >= 0.95 and cot["ci_excludes_zero"].mean() >= 0.95
    assert (cot["bsi_baseline"] == warning["bsi_baseline"]).all()

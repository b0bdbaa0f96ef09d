"""The paired study's MDE, checked by simulation: plant the reported MDE in a respondent whose
answers cluster by prompt variant (an item's own level, shared by both conditions), run the
study's own tests (Welch's t, and the pooled z-test Newcombe's row carries) over 2,000 seeds,
and count. 0.80 +- 0.06 detected at the MDE; at 0, the level within two standard errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrator.analysis.power import mde
from orchestrator.analysis.stats import newcombe, welch
from orchestrator.studies.paired.power import Spread, mean_design, share_design

SEEDS = 2000
ALPHA = 0.05
NULL_BAND = 2 * math.sqrt(ALPHA * (1 - ALPHA) / SEEDS)


def _means(rng, variants, samples, sd, icc, effect):
    """Numbers: a variant's own level (ICC of the answer variance) shared by both conditions."""
    item = rng.normal(0, sd * math.sqrt(icc), variants)
    noise = sd * math.sqrt(1 - icc)
    answers = [
        np.repeat(item, samples) + rng.normal(0, noise, variants * samples) + shift
        for shift in (0.0, effect)
    ]
    a, b = answers
    return welch(b.mean(), b.var(ddof=1), len(b), a.mean(), a.var(ddof=1), len(a))[3]


def _shares(rng, variants, samples, share, icc, effect):
    """Choices: each variant's share of the target drawn around `share` (a beta whose spread
    is the ICC), the condition adding `effect` to it."""
    if icc > 0:
        strength = (1 - icc) / icc
        base = rng.beta(share * strength, (1 - share) * strength, variants)
    else:
        base = np.full(variants, share)
    hits = [rng.binomial(samples, np.clip(base + shift, 0, 1)).sum() for shift in (0.0, effect)]
    n = variants * samples
    return newcombe(hits[1], n, hits[0], n)[3]


SETTINGS = {
    # name: (kind, variants, samples, spread, icc, centred default for shares)
    "numbers, 1 prompt x 20 samples (the demo)": ("mean", 1, 20, 1.0, 0.0),
    "numbers, 4 variants x 10 samples, ICC 0.3": ("mean", 4, 10, 1.0, 0.3),
    "ratings-like, 5 variants x 30 samples, ICC 0.5": ("mean", 5, 30, 1.5, 0.5),
    "shares from 0.5, 1 prompt x 80 samples": ("share", 1, 80, 0.5, 0.0),
    "shares from 0.2, 3 variants x 50 samples, ICC 0.2": ("share", 3, 50, 0.2, 0.2),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_reported_mde_is_detected_80_percent_of_the_time(name):
    kind, variants, samples, spread, icc = SETTINGS[name]
    if kind == "mean":
        design = mean_design(variants, Spread(spread, 0.5, icc))
        draw = lambda rng, d: _means(rng, variants, samples, spread, icc, d)  # noqa: E731
    else:
        centred = spread == 0.5
        design = share_design(variants, Spread(1.0, spread, icc), centred=centred)
        draw = lambda rng, d: _shares(rng, variants, samples, spread, icc, d)  # noqa: E731
    effect = mde(design, samples, ALPHA, 0.8)
    if kind == "share" and spread == 0.5:
        # the centred default puts the shares either side of 0.5: plant them so
        draw = lambda rng, d: _shares(  # noqa: E731
            rng, variants, samples, 0.5 - effect / 2 if d else 0.5, icc, d
        )
    detected = np.mean([draw(np.random.default_rng(s), effect) < ALPHA for s in range(SEEDS)])
    null = np.mean([draw(np.random.default_rng(s + SEEDS), 0.0) < ALPHA for s in range(SEEDS)])
    print(f"{name}: MDE {effect:.3f}, detected {detected:.1%}, at 0 {null:.1%}")
    assert abs(detected - 0.8) <= 0.06, (effect, detected)
    if icc == 0:  # the answers are the draws the test assumes: its level holds
        assert abs(null - ALPHA) <= NULL_BAND, null
    else:  # the item's level cancels, yet the test counts it: conservative, as designed
        assert null <= ALPHA + NULL_BAND, null


def test_a_pilot_s_spread_and_icc_are_recovered_and_the_effect_is_not_item_variance():
    """A pilot frame with 12 variants x 200 answers a condition, SD 2, ICC 0.3 and a large
    effect between the conditions: the SD and ICC come back; the effect is not counted."""
    import polars as pl

    from orchestrator.spec.models import Metric
    from orchestrator.studies.paired.power import pilot_spread

    rng = np.random.default_rng(46)
    rows = []
    item = rng.normal(0, 2 * math.sqrt(0.3), 12)
    for condition, shift in ((0, 0.0), (1, 10.0)):
        for v in range(12):
            for value in item[v] + shift + rng.normal(0, 2 * math.sqrt(0.7), 200):
                rows.append({"conditionIndex": condition, "variant": f"v{v}", "value": value})
    metric = Metric(type="mean-difference")
    spread, said = pilot_spread(pl.DataFrame(rows), metric, None)
    assert abs(spread.sd - 2) < 0.25 and abs(spread.icc - 0.3) < 0.12, said

"""Minimum detectable effects, and the samples a target effect needs, for any study's test.

A study describes its test at a given number of samples per cell as a `Precision`: the standard
error its test divides by (`se_test`), the spread its estimate really has (`se_true`), the
degrees of freedom of its reference distribution and the smallest p it can give. The two
errors differ where a test counts variance that cancels in the estimate (an item effect shared
by both conditions, which an answer-level test takes for noise): the test is then conservative,
and its power is lower than its nominal error suggests.

A two-sided test at level alpha detects a true effect d with probability about
P(d/se_true + Z > crit * se_test/se_true), so the effect it detects with probability `power` is

    MDE = t(1 - alpha/2, df) * se_test + t(power, df) * se_true

(the usual normal approximation, with t quantiles on the test's df). Where an error depends on
the effect itself (a share's binomial variance), the MDE is found by fixed-point iteration.
`tests/test_power_<study>.py` check the result by simulation, study by study.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from scipy import special

# Far beyond any campaign: "more samples" that need more than this are "no number of samples".
MAX_SAMPLES = 1_000_000


@dataclass(frozen=True)
class Precision:
    """A test's errors at one number of samples per cell."""

    se_test: float  # the standard error the test divides by
    se_true: float  # the estimate's real standard deviation (<= se_test for a conservative test)
    df: float = math.inf  # the reference distribution's degrees of freedom (inf: normal)
    min_p: float = 0.0  # the smallest p the test can give (a randomisation test's floor)


# samples per cell, effect -> the test's precision there
Design = Callable[[int, float], Precision]


def _quantile(q: float, df: float) -> float:
    return float(special.ndtri(q) if math.isinf(df) else special.stdtrit(df, q))


def mde(design: Design, samples: int, alpha: float, power: float) -> float | None:
    """The smallest effect the test detects with probability `power` at `samples` per cell:
    None where it can detect none (its smallest p is above alpha, or it has no error at all)."""
    effect = 1e-9  # not 0: a share of 0 or 1 has no variance at an effect of exactly 0
    for _ in range(100):
        prec = design(samples, effect)
        if prec.min_p > alpha or not (prec.se_test > 0 and math.isfinite(prec.se_test)):
            return None
        found = (
            _quantile(1 - alpha / 2, prec.df) * prec.se_test
            + _quantile(power, prec.df) * prec.se_true
        )
        if abs(found - effect) < 1e-10:
            break
        effect = found
    return effect


def floor(design: Design, alpha: float, power: float) -> float | None:
    """The MDE with as many samples as one could want: what only more units can lower. 0 where
    it still falls with samples at MAX_SAMPLES (no part of the error stays: samples always
    help)."""
    at_most = mde(design, MAX_SAMPLES, alpha, power)
    at_quarter = mde(design, MAX_SAMPLES // 4, alpha, power)
    if at_most is not None and at_quarter is not None and at_quarter > 1.2 * at_most:
        return 0.0
    return at_most


def samples_for(design: Design, target: float, alpha: float, power: float) -> int | None:
    """The fewest samples per cell whose MDE is at most `target`; None when no number of
    samples reaches it (the floor is above it: more units are needed, not more samples)."""
    reached = lambda n: (found := mde(design, n, alpha, power)) is not None and found <= target  # noqa: E731
    if not reached(MAX_SAMPLES):
        return None
    low, high = 0, 1  # reached(high); not reached(low)
    while not reached(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reached(middle) else (middle, high)
    return high


def bh_level(alpha: float, tests: int) -> float:
    """The level Benjamini-Hochberg holds one test to when it is the only real effect among
    `tests`: alpha / tests, the conservative planning level (with more real effects BH's
    thresholds rise towards alpha, so power is at least what this level gives)."""
    return alpha / max(tests, 1)


@dataclass(frozen=True)
class Target:
    """What the researcher asks: the study's alpha, the power wanted and, with `--mde`, the
    effect (in the measure's own units) the campaign must detect."""

    alpha: float = 0.05
    power: float = 0.8
    mde: float | None = None


@dataclass(frozen=True)
class Planned:
    """One study's test of one experiment (or score) on one model, as planned: what it measures,
    over which units, at what level, and its `design` (None: the study tests nothing there, and
    `note` says why)."""

    study: str
    job: str
    experiment: str
    model: str  # model key
    measure: str  # the headline measure, in words
    scale: str  # the unit its effects are in: "share", "points on 1-7", "answer SDs", "EUR"
    test: str
    unit: str  # what the test counts as independent: answers, variants, value cells, tasks, items
    units: int  # how many of them the plan gives the test (per arm where arms are separate)
    samples: int  # samples per cell, as planned
    alpha: float  # the level this test is held to, after the study's correction
    correction: str  # "" or how the level was set from alpha
    design: Design | None
    variance: str  # where its variance came from: the pilot's figures or the stated defaults
    note: str = ""
    experiments: tuple[str, ...] = ()  # the experiments whose calls it takes (default: its own)


def assess(planned: Planned, target: Target) -> dict[str, object]:
    """The figures for one planned test: MDE at the planned samples, what unlimited samples
    would give (the floor only more units lower), the smallest p the test can give, and with
    a target effect the samples per cell it needs (None: no number of samples reaches it)."""
    out: dict[str, object] = {"mde": None, "floor": None, "min_p": None, "more_samples_help": False}
    design = planned.design
    if design is None:
        return out | ({"samples_needed": None} if target.mde is not None else {})
    at_plan = design(planned.samples, 0.0)
    found = mde(design, planned.samples, planned.alpha, target.power)
    lowest = floor(design, planned.alpha, target.power)
    out |= {
        "mde": found,
        "floor": lowest,
        "min_p": at_plan.min_p,
        # unlimited samples lower it by more than 1%
        "more_samples_help": found is not None and lowest is not None and lowest < found * 0.99,
    }
    if target.mde is not None:
        out["samples_needed"] = samples_for(design, target.mde, planned.alpha, target.power)
    return out


def one_way(values, groups) -> tuple[float, float]:
    """(within-group variance, between-group variance component) of answers by a one-way
    random-effects ANOVA (the method-of-moments estimator, clipped at 0): how much of an
    answer's spread belongs to its item rather than to the draw."""
    import numpy as np

    values, groups = np.asarray(values, float), np.asarray(groups)
    labels, index = np.unique(groups, return_inverse=True)
    count = np.bincount(index).astype(float)
    means = np.bincount(index, weights=values) / count
    total, k = len(values), len(labels)
    if total - k < 1:
        return float("nan"), 0.0
    within = float(((values - means[index]) ** 2).sum() / (total - k))
    if k < 2:
        return within, 0.0
    between_ms = float((count * (means - values.mean()) ** 2).sum() / (k - 1))
    n0 = (total - (count**2).sum() / total) / (k - 1)
    return within, max(0.0, (between_ms - within) / n0)


def spread_of_effects(effects, noise: float) -> float:
    """The variance of units' true effects (tau^2): the observed effects' variance less what
    the sampling noise alone (`noise`, the variance of one unit's estimate) puts in it."""
    import numpy as np

    effects = np.asarray(effects, float)
    effects = effects[np.isfinite(effects)]
    if len(effects) < 2:
        return 0.0
    return max(0.0, float(effects.var(ddof=1)) - noise)

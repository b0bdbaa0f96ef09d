"""Tests of the bias scores, vectorised over rows: the paper's Student t-test on the 0/1 "chose
the target" answers, the Wald standard error of a difference of shares, and the
difference-in-differences of two independent bias scores.

The shares' own intervals are Newcombe's (analysis/stats.py); the t-test is there because the
paper reports it ("student's t-test", equal variances), and each is checked against scipy in
the tests.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from orchestrator.analysis.stats import Z95


def student(count_a, n_a, count_b, n_b):
    """Student's two-sample t-test (pooled variance) of the 0/1 answers count_a of n_a against
    count_b of n_b: (t, df, p), as scipy.stats.ttest_ind would give on the 0/1 values. A 0/1
    sample's variance follows from its share: n p (1 - p) / (n - 1). t is infinite (p = 0) when
    both samples are constant and differ, NaN (no test) when they are constant and equal or a
    sample is empty, and p is NaN with fewer than 3 answers in all (no degree of freedom)."""
    count_a, n_a, count_b, n_b = (np.asarray(x, float) for x in (count_a, n_a, count_b, n_b))
    with np.errstate(divide="ignore", invalid="ignore"):
        pa, pb = count_a / n_a, count_b / n_b
        df = n_a + n_b - 2
        pooled = (n_a * pa * (1 - pa) + n_b * pb * (1 - pb)) / df
        t = (pa - pb) / np.sqrt(pooled * (1 / n_a + 1 / n_b))
        p = 2 * stats.t.sf(np.abs(t), df)
    ok = (n_a >= 1) & (n_b >= 1) & (df >= 1)
    nan = np.full(np.shape(t), np.nan)
    return np.where(ok, t, nan), np.where(ok, df, nan), np.where(ok & ~np.isnan(t), p, nan)


def share_difference_se(count_a, n_a, count_b, n_b, add: int = 0):
    """The (unpooled, Wald) standard error of count_a/n_a - count_b/n_b; with add = 1,
    Agresti and Caffo's: one answer of each kind added to each sample, so that a share of 0 or
    1 (every answer alike, common with small samples at T=0) does not claim no error at all."""
    count_a, n_a, count_b, n_b = (np.asarray(x, float) for x in (count_a, n_a, count_b, n_b))
    count_a, count_b, n_a, n_b = count_a + add, count_b + add, n_a + 2 * add, n_b + 2 * add
    with np.errstate(divide="ignore", invalid="ignore"):
        pa, pb = count_a / n_a, count_b / n_b
        return np.sqrt(pa * (1 - pa) / n_a + pb * (1 - pb) / n_b)


def difference(est_a, se_a, est_b, se_b, z: float = Z95):
    """est_a - est_b of two independent estimates (their variances add): (difference, ci_low,
    ci_high, p) with the normal interval and the z-test's p. p is NaN when the standard error
    is 0 (both estimates exact: every answer in a condition alike)."""
    est_a, se_a, est_b, se_b = (np.asarray(x, float) for x in (est_a, se_a, est_b, se_b))
    diff = est_a - est_b
    se = np.sqrt(se_a**2 + se_b**2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(se > 0, 2 * stats.norm.sf(np.abs(diff) / se), np.nan)
    return diff, diff - z * se, diff + z * se, p

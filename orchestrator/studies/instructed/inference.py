"""Tests of the bias scores: over value cells (`clustered`, the headline), and the paper's
Student t-test on the 0/1 "chose the target" answers (`student`, vectorised over rows).

Why clustered: at T=0, and always when answers are scored, a prompt's answer is fixed, and a
model answering by content gives one answer to every prompt built from the same values (all
option orders, all templates). Those prompts are one draw. Counted as many, a respondent with
no bias at all was called biased in 40% of tests (tests/test_instructed_null.py). A p-value can only mean "would this hold on
other items", so the unit is the value cell: the treatment-minus-control difference of shares
(the pooled score itself) with its CR2 variance over value cells and a t reference with the
Bell-McCaffrey degrees of freedom (analysis/cr2.py, as the 11-bias study does).

The t-test is there because the paper reports it ("student's t-test", equal variances); it
treats prompts as independent. Both are checked against scipy in the tests.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from orchestrator.analysis.cr2 import cr2_cells
from orchestrator.analysis.stats import ZERO

# groups: control, treatment; the treatment coefficient is the bias score
ARMS = np.array([[1.0, 0.0], [1.0, 1.0]])
# groups: control and treatment of the first model, then of the second; the last coefficient
# is the second model's bias score minus the first's
TWO_MODELS = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]], float)
NO_CELLS = "fewer than 2 value cells: no test over items"
WHOLE_ARM = "one value cell holds all of a group's answers: no test over cells"
ALIKE = "no variation between value cells: exact randomisation p over the cells, no interval"
NO_RELABELLING = "no variation between value cells: no interval, and no relabelling to test by"


def clustered(counts, hits, design=ARMS, contrast=(0.0, 1.0)) -> dict:
    """The contrast of the groups' shares with its CR2 t-test over value cells: counts and hits
    are (K, G) per cell and group (design's rows). Returns estimate, se, df, ci_low, ci_high, p,
    cells (K) and a note where the test is not the CR2 t.

    Where every cell has each group's overall share (every answer in each arm alike, say:
    11/11 against 0/10), the CR2 variance is 0 and t is infinite. Then p is the exact
    randomisation p of the test over cells, which is what a reader can use: every cell's
    contrast is the estimate, and only the relabellings that flip them all are as extreme
    (`exact_p`); there is no interval."""
    counts, hits = np.asarray(counts, float), np.asarray(hits, float)
    keep = counts.sum(1) > 0
    counts, hits = counts[keep], hits[keep]
    out: dict[str, float | int | str | None] = dict.fromkeys(
        ("estimate", "se", "df", "ci_low", "ci_high", "p"), np.nan
    )
    out |= {"cells": int(len(counts)), "note": None}
    if (counts.sum(0) == 0).any():
        return out | {"note": NO_CELLS}
    estimate, variance, df = cr2_cells(counts, hits, design, np.asarray(contrast, float))
    out["estimate"] = estimate
    if len(counts) < 2:
        return out | {"note": NO_CELLS}
    shares = hits.sum(0) / counts.sum(0)
    if np.allclose(hits, counts * shares, rtol=0, atol=1e-9):  # every cell at the shares
        p = exact_p(counts, estimate, shares)
        return out | {"p": p, "note": NO_RELABELLING if np.isnan(p) else ALIKE}
    if np.isnan(variance):
        return out | {"note": WHOLE_ARM}
    if variance <= ZERO**2:  # every cell's contrast is 0 (two models answering alike): p is 1
        p = 1.0 if abs(estimate) <= ZERO else np.nan
        return out | {"p": p, "note": "no variation of the contrast between value cells"}
    se = float(np.sqrt(variance))
    half = stats.t.ppf(0.975, df) * se
    p = 2 * stats.t.sf(abs(estimate) / se, df)
    return out | {"se": se, "df": df, "ci_low": estimate - half, "ci_high": estimate + half, "p": p}


def exact_p(counts: np.ndarray, estimate: float, shares: np.ndarray) -> float:
    """The two-sided randomisation p where every cell is at its groups' overall shares.

    Two arms: the cells holding both may each be flipped (arm labels swapped within the cell),
    the cells holding one may swap arm labels among themselves. Two models (TWO_MODELS' four
    groups): the model labels may be swapped within each cell, for the arms it holds for both.
    The observed arrangement and, where the data's shape allows it, its mirror image are the
    only ones as extreme. NaN where no such relabelling exists (a cell holding an arm for one
    model only, or a single group)."""
    if abs(estimate) <= ZERO:
        return 1.0
    held = counts > 0
    if counts.shape[1] == 4:
        arms = ((0, 2, -1.0), (1, 3, 1.0))  # (first, second model's group, sign in a - b)
        if any((held[:, a] != held[:, b]).any() for a, b, _ in arms):
            return np.nan
        moved = sum(held[:, a] * sign * (shares[a] - shares[b]) for a, b, sign in arms)
        flips = int((np.abs(moved) > ZERO).sum())
        return min(1.0, 2.0 / 2.0**flips)
    if counts.shape[1] != 2:
        return np.nan
    both = held.sum(1) == 2
    full = int(both.sum())
    partial = counts[~both]
    if not len(partial):
        return min(1.0, 2.0 / 2.0**full)
    treated = int((partial[:, 1] > 0).sum())
    mirrored = 2 if 2 * treated == len(partial) else 1
    return min(1.0, mirrored / (2.0**full * math.comb(len(partial), treated)))


def student(count_a, n_a, count_b, n_b):
    """Student's two-sample t-test (pooled variance) of the 0/1 answers count_a of n_a against
    count_b of n_b: (t, df, p), as scipy.stats.ttest_ind would give on the 0/1 values. A 0/1
    sample's variance follows from its share: n p (1 - p) / (n - 1). Where both samples are
    constant and differ (11/11 against 0/10) t is infinite and its p of 0 says nothing: t is
    NaN there and p is Fisher's exact test's. t and p are NaN (no test) when the samples are
    constant and equal or a sample is empty, and p with fewer than 3 answers in all."""
    count_a, n_a, count_b, n_b = (np.asarray(x, float) for x in (count_a, n_a, count_b, n_b))
    with np.errstate(divide="ignore", invalid="ignore"):
        pa, pb = count_a / n_a, count_b / n_b
        df = n_a + n_b - 2
        pooled = (n_a * pa * (1 - pa) + n_b * pb * (1 - pb)) / df
        t = (pa - pb) / np.sqrt(pooled * (1 / n_a + 1 / n_b))
        p = 2 * stats.t.sf(np.abs(t), df)
    ok = (n_a >= 1) & (n_b >= 1) & (df >= 1)
    nan = np.full(np.shape(t), np.nan)
    constant = ok & np.isinf(t)
    exact = np.array(
        [
            stats.fisher_exact([[a, na - a], [b, nb - b]]).pvalue if c else np.nan
            for a, na, b, nb, c in np.broadcast(count_a, n_a, count_b, n_b, constant)
        ]
    ).reshape(np.shape(t))
    p = np.where(constant, exact, np.where(ok & ~np.isnan(t), p, nan))
    return np.where(ok & ~constant, t, nan), np.where(ok, df, nan), p

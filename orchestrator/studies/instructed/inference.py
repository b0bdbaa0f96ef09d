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

from orchestrator.analysis.cr2 import cr2_cells, cr2_cells_many
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


def contrast_range(design: np.ndarray, contrast: np.ndarray) -> tuple[float, float]:
    """The values the contrast can take when every group's share lies in [0, 1]: an interval of
    shares is clipped to it ([-1, 1] for a bias score, [-2, 2] for a difference of two)."""
    weights = np.linalg.solve(np.asarray(design, float).T, np.asarray(contrast, float))
    return float(np.minimum(weights, 0).sum()), float(np.maximum(weights, 0).sum())


def clustered(counts, hits, design=ARMS, contrast=(0.0, 1.0)) -> dict:
    """The contrast of the groups' shares with its CR2 t-test over value cells: counts and hits
    are (K, G) per cell and group (design's rows). Returns estimate, se, df, ci_low, ci_high, p,
    cells (K) and a note where the test is not the CR2 t.

    The p-value, by case:
    - every cell at each group's overall share (11/11 against 0/10 in every cell, say): the CR2
      variance is 0 and t infinite; p is the randomisation p of the estimate (`exact_p`), no
      interval;
    - at most FEW_CELLS cells: the randomisation p of the CR2 t over the 2^S relabellings
      within the S cells holding the groups a relabelling swaps (`randomised_p`; cells holding
      one arm keep their labels). With so few cells the t reference is not to be trusted in
      the tails: one answer flipped in one of 7 alike cells took the t p from the exact
      2/2^7 = 0.016 to 5e-14; the randomisation p cannot go below 2/2^S;
    - otherwise (more than FEW_CELLS cells) the CR2 t with Bell-McCaffrey df, whose level
      holds at those cell counts (tests/test_instructed_stats.py).
    The interval is the CR2 t's, clipped to the values a contrast of shares can take; with
    few cells it comes from the t reference while p is the randomisation's, so the two can
    disagree near 0.05 (an interval just excluding 0 beside a p just above 0.05)."""
    counts, hits = np.asarray(counts, float), np.asarray(hits, float)
    design, contrast = np.asarray(design, float), np.asarray(contrast, float)
    keep = counts.sum(1) > 0
    counts, hits = counts[keep], hits[keep]
    out: dict[str, float | int | str | None] = dict.fromkeys(
        ("estimate", "se", "df", "ci_low", "ci_high", "p"), np.nan
    )
    out |= {"cells": int(len(counts)), "note": None}
    if (counts.sum(0) == 0).any():
        return out | {"note": NO_CELLS}
    estimate, variance, df = cr2_cells(counts, hits, design, contrast)
    out["estimate"] = estimate
    if len(counts) < 2:
        return out | {"note": NO_CELLS}
    shares = hits.sum(0) / counts.sum(0)
    if np.allclose(hits, counts * shares, rtol=0, atol=1e-9):  # every cell at the shares
        p = exact_p(counts, hits, design, contrast, estimate)
        return out | {"p": p, "note": NO_RELABELLING if np.isnan(p) else ALIKE}
    if np.isnan(variance):
        return out | {"note": WHOLE_ARM}
    if variance <= ZERO**2:  # every cell's contrast is 0 (two models answering alike): p is 1
        p = 1.0 if abs(estimate) <= ZERO else np.nan
        return out | {"p": p, "note": "no variation of the contrast between value cells"}
    se = float(np.sqrt(variance))
    half = stats.t.ppf(0.975, df) * se
    low, high = contrast_range(design, contrast)
    out |= {
        "se": se,
        "df": df,
        "ci_low": max(low, estimate - half),
        "ci_high": min(high, estimate + half),
        "p": 2 * stats.t.sf(abs(estimate) / se, df),
    }
    swap = SWAPS.get(design.shape[0])
    if len(counts) <= FEW_CELLS and swap is not None and _swappable(counts, swap).any():
        out |= {"p": randomised_p(counts, hits, design, contrast), "note": FEW}
    return out


SWAPS = {2: [1, 0], 4: [2, 3, 0, 1]}  # ARMS: the arms swap; TWO_MODELS: the models swap
FEW_CELLS = 12  # up to 2^12 relabellings, enumerated (CR2 of all at once: ~0.1 s)
DRAWS = 1 << 16  # relabellings of the estimate enumerated, or drawn beyond (a seeded draw)
FEW = "few value cells: randomisation p of the CR2 t over the cells' relabellings"


def _swappable(counts: np.ndarray, swap: list[int]) -> np.ndarray:
    """Per cell, whether a relabelling can swap its groups: it holds both of each pair."""
    held = counts > 0
    return (held == held[:, swap]).all(1)


def _relabellings(k: int, limit: int = DRAWS) -> np.ndarray:
    """(R, k) which of k cells each relabelling swaps: all 2^k up to `limit`, beyond that the
    observed one and limit - 1 drawn at random (seeded: a report reads the same every time)."""
    if 2**k <= limit:
        return ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(bool)
    drawn = np.random.default_rng(20_241_204).random((limit - 1, k)) < 0.5
    return np.vstack([np.zeros((1, k), bool), drawn])


def randomised_p(counts, hits, design, contrast) -> float:
    """The two-sided randomisation p of the CR2 t: the share of the 2^S relabellings within
    the S cells holding both groups of each swapped pair (arm labels swapped for two arms,
    model labels for two models) whose |t| is at least the observed one. A cell holding one
    arm only (no answer chose target or competitor there, say) keeps its labels in every
    relabelling. A relabelling whose CR2 is undefined counts as extreme (conservative)."""
    swap = SWAPS[len(design)]
    movable = _swappable(counts, swap)
    drawn = _relabellings(int(movable.sum()))
    flips = np.zeros((len(drawn), len(counts), 1), bool)
    flips[:, movable, 0] = drawn
    estimate, variance, _ = cr2_cells_many(
        np.where(flips, counts[:, swap], counts),
        np.where(flips, hits[:, swap], hits),
        design,
        contrast,
    )
    size = np.abs(estimate)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(variance > ZERO**2, size / np.sqrt(variance), np.where(size > ZERO, np.inf, 0))
    t = np.where(np.isnan(variance), np.inf, t)
    return float(np.mean(t >= t[0] * (1 - 1e-9)))


def exact_p(counts, hits, design, contrast, estimate: float) -> float:
    """The two-sided randomisation p of the estimate where every cell is at its groups'
    overall shares (the CR2 t is infinite there, so the estimate is the statistic).

    Two arms: the cells holding both may each be flipped (arm labels swapped within the cell),
    the cells holding one may swap arm labels among themselves; only the observed arrangement
    and, where as many cells hold each arm, its mirror image are as extreme. Two models
    (TWO_MODELS' four groups): the model labels may be swapped within each cell; every such
    relabelling is enumerated (up to 2^16, a seeded draw of 2^16 beyond), since with cells
    holding one arm many of them move the estimate as far as the observed one does. NaN where
    no such relabelling exists (a cell holding an arm for one model only, or a single group)."""
    if abs(estimate) <= ZERO:
        return 1.0
    held = counts > 0
    if counts.shape[1] == 4:
        swap = SWAPS[4]
        if not _swappable(counts, swap).all():
            return np.nan
        flips = _relabellings(len(counts)).astype(float)
        weights = np.linalg.solve(np.asarray(design, float).T, np.asarray(contrast, float))
        n = counts.sum(0) + flips @ (counts[:, swap] - counts)
        k = hits.sum(0) + flips @ (hits[:, swap] - hits)
        with np.errstate(divide="ignore", invalid="ignore"):
            moved = np.abs((k / n) @ weights)
        return float(np.mean(moved >= abs(estimate) - ZERO))
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

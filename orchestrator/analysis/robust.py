"""Estimates of a shift between two samples that a few extreme answers cannot carry away.

A model asked for a price that answers 1.5e22 once moves a mean by 1.5e20 and widens its Welch
interval to match, with nothing to say that one answer did it. Beside the mean (the seeds'
measure, kept as the headline) a study can show:

- the Hodges-Lehmann shift, the median of all n*m pairwise differences a_i - b_j, an estimate
  of the median of the distribution of A - B, with the Brunner-Munzel p (two-sided, as
  scipy's) and, as its interval, the shifts d that test of a - d against b does not reject
  (brunner_munzel.py). Neither assumes a pure shift: anchoring often narrows the treated
  answers, and the Moses interval and Mann-Whitney p used before did assume one (with equal
  medians and unequal spreads they covered 0 in 83-93% of runs and called p < .05 in 7-16%);
- `leave_two_out`: whether at most two answers dominate the mean difference;
- `outside`: how many answers fall outside a range the job declares plausible.

Pairwise differences are sorted outright up to BRUTE_PAIRS. Beyond, their order statistics are
selected without forming them (a cell of 10^5 answers a side has 10^10 differences), over the
distinct values with their counts as weights: answers repeat (ratings, round numbers), and
each step's search then costs the distinct values, not the answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from orchestrator.analysis.brunner_munzel import MIN_ANSWERS, BMShift
from orchestrator.analysis.stats import welch

BRUTE_PAIRS = 1_000_000  # 8 MB of differences: partitioned in place
SORTED_CANDIDATES = 1 << 16  # a search's last candidates: sorted with their weights (~5 ms)
LEFT_OUT = 2  # "a few" answers: at most this many may carry the mean before it is flagged
CI_WIDTHS = 2.0  # leaving them out must move the mean difference by more than this many
MIN_SHARE = 0.25  # half-widths of its CI, and this share of its size or of the answers' SD


@dataclass(frozen=True)
class Shift:
    """a - b as the Hodges-Lehmann estimate, with the Brunner-Munzel p and interval at `level`
    (NaN, with the level, when a condition has fewer than MIN_ANSWERS answers)."""

    estimate: float
    low: float
    high: float
    p: float
    level: float


NO_SHIFT = Shift(np.nan, np.nan, np.nan, np.nan, np.nan)


def _count(a: np.ndarray, b_desc: np.ndarray, pivot: float, strict: bool) -> np.ndarray:
    """Per a_i, how many of a_i - b_desc[j] are < pivot (strict) or <= pivot. Row i is
    increasing in j (b_desc descends, distinct, and rounded subtraction is monotone), so the
    count is where the row crosses the pivot: found for all rows at once by one search of b for
    a_i - pivot, then moved to the exact crossing on the very floats sorting would see (a
    rounding can put it a value or two off)."""
    m = len(b_desc)
    b_asc = b_desc[::-1]

    def below(at: np.ndarray, rows: np.ndarray) -> np.ndarray:
        d = a[rows] - b_desc[at]
        return (d < pivot) if strict else (d <= pivot)

    # the places where b_desc[j] > a_i - pivot, as far as a - pivot rounds
    lo = m - np.searchsorted(b_asc, a - pivot, side="right")
    rows = np.arange(len(a))
    while True:
        down = lo > 0
        down[down] = ~below(lo[down] - 1, rows[down])
        up = lo < m
        up[up] = below(lo[up], rows[up])
        if not (down.any() or up.any()):
            return lo
        lo[down] -= 1
        lo[up] += 1


def _select(a: np.ndarray, wa: np.ndarray, b_desc: np.ndarray, wb: np.ndarray, k: int) -> float:
    """The k-th smallest (0-based) of the differences a_i - b_desc[j] of distinct values, the
    pair (i, j) standing for wa[i] * wb[j] answer pairs. Random pivots among the candidates
    still open per row ([left_i, right_i)) narrow them, O(n log m) per step, O(log nm) steps
    expected, until few are left (SORTED_CANDIDATES): those are sorted with their weights. The
    answer is exact whatever the pivots; the generator is seeded only to repeat the work."""
    rng = np.random.default_rng(0)
    upto_b = np.concatenate([[0], np.cumsum(wb)])  # answers in b_desc[:j]
    left, right = np.zeros(len(a), np.int64), np.full(len(a), len(b_desc), np.int64)

    def pairs(ends: np.ndarray) -> int:  # answer pairs left of `ends`, all rows
        return int((wa * upto_b[ends]).sum())

    while True:
        sizes = right - left
        ends = np.cumsum(sizes)
        if ends[-1] <= SORTED_CANDIDATES:  # few candidates left: formed and sorted, with weights
            rows = np.repeat(np.arange(len(a)), sizes)
            places = left[rows] + np.arange(ends[-1]) - np.repeat(ends - sizes, sizes)
            d = a[rows] - b_desc[places]
            order = np.argsort(d, kind="stable")
            covered = np.cumsum((wa[rows] * wb[places])[order])
            rank = k - pairs(left)  # those left of `left` are below every candidate
            return float(d[order][np.searchsorted(covered, rank, side="right")])
        r = int(rng.integers(ends[-1]))
        i = int(np.searchsorted(ends, r, side="right"))
        pivot = a[i] - b_desc[left[i] + r - (ends[i] - sizes[i])]
        below, upto = _count(a, b_desc, pivot, True), _count(a, b_desc, pivot, False)
        if k < pairs(below):
            right = np.minimum(right, below)
        elif k < pairs(upto):
            return float(pivot)
        else:
            left = np.maximum(left, upto)


def order_differences(a, b, ks) -> np.ndarray:
    """The ks-th smallest (0-based) of the len(a)*len(b) differences a_i - b_j."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    ks = np.asarray(ks, np.int64)
    if len(a) * len(b) <= BRUTE_PAIRS:
        return np.partition(np.subtract.outer(a, b).ravel(), ks)[ks]
    va, wa = np.unique(a, return_counts=True)
    vb, wb = np.unique(b, return_counts=True)
    if len(va) > len(vb):  # search the longer side: fewer rows, the same count per step
        va, wa, vb, wb = -vb[::-1], wb[::-1], -va[::-1], wa[::-1]  # a - b = (-b) - (-a)
    return np.array([_select(va, wa, vb[::-1].copy(), wb[::-1].copy(), int(k)) for k in ks])


def hodges_lehmann(a, b, level: float = 0.95) -> Shift:
    """a - b: the median of all pairwise differences, with the Brunner-Munzel p and the shifts
    that test does not reject as the interval (brunner_munzel.py: neither assumes the two
    conditions differ by a pure shift; both need MIN_ANSWERS answers a condition). The ends
    are pairwise differences; with ties (ratings, round numbers) the interval is closed, and
    conservative (tests/test_extreme_answers.py; unequal spreads: test_robust_interval.py)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return NO_SHIFT
    pairs = n * m
    middle = order_differences(a, b, [(pairs - 1) // 2, pairs // 2])
    estimate = float((middle[0] + middle[1]) / 2)
    if min(n, m) < MIN_ANSWERS or np.isnan(a).any() or np.isnan(b).any():
        return Shift(estimate, np.nan, np.nan, np.nan, np.nan)
    test = BMShift(a, b)
    low, high = test.interval(estimate, level)
    # no spread at all: nothing to rank (the interval is then the one shift, [0, 0])
    p = np.nan if np.ptp(np.concatenate([a, b])) == 0 else test.p()
    return Shift(estimate, low, high, p, level if low == low else np.nan)


@dataclass(frozen=True)
class Influence:
    """The mean difference a - b with the LEFT_OUT answers farthest from their own condition's
    median left out (`without`), the half-width of its Welch interval then, the move leaving
    them out must exceed to count (`threshold`, see `leave_two_out`), and whether it does
    (`dominated`; None: too few answers)."""

    without: float
    half_width: float
    threshold: float
    dominated: bool | None


NO_INFLUENCE = Influence(np.nan, np.nan, np.nan, None)


def leave_two_out(a, b, level: float = 0.95) -> Influence:
    """Whether at most two answers carry the mean difference. The two answers farthest from
    their condition's median (both conditions together, in the answers' unit) are left out;
    the mean difference is dominated when that moves it by more than both

    - CI_WIDTHS (2) half-widths of its Welch interval without them: the full width of that
      interval, so the mean with them lies farther from the rest's estimate than the rest's
      whole interval spans (an interval of the same width around each would not overlap); and
    - MIN_SHARE (1/4) of the larger of |the difference without them| and the SD of the other
      answers (pooled over the conditions): a move that changes neither the effect's size nor
      its sign by a material share, nor a quarter of the answers' spread, is not one that two
      answers dominate, however narrow the interval (the rest may be constant: 19 answers of 20
      and one of 25 against 20 of 18 move 2.0 to 2.25, not flagged). Only when the rest is
      constant and the same in both conditions does any move count: the difference is then
      those answers alone.

    Calibrated by simulation (3,000 seeded samples of n answers a condition, prices around 1150
    against 880; tests/test_extreme_answers.py asserts them): normal answers 0% at n = 20 and
    100; t with 3 df 0.5% and 0.1%; lognormal with sigma 1 1.7% and 0.2%, with sigma 1.5 10%
    and 2.8% (a tail that heavy does carry the mean); one answer of 1.5e22 among prices, or one
    1000 times the median among lognormal answers (sigma 1), 100%. One half-width alone (the
    first rule) fired on 3.9% and 1% (t3), 17% and 2.5% (sigma 1), 37% and 17% (sigma 1.5)."""
    # sorted, so that which of two equally far answers is left out does not hang on the order
    # the records were written in (a batch run writes them in another order than an online one)
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    if len(a) + len(b) < 2 * (LEFT_OUT + 2) or min(len(a), len(b)) < 2:
        return NO_INFLUENCE
    far = np.concatenate([np.abs(a - np.median(a)), np.abs(b - np.median(b))])
    drop = np.argsort(-far, kind="stable")[:LEFT_OUT]
    keep = np.ones(len(far), bool)
    keep[drop] = False
    a2, b2 = a[keep[: len(a)]], b[keep[len(a) :]]
    if min(len(a2), len(b2)) < 2:
        return NO_INFLUENCE
    without = float(a2.mean() - b2.mean())
    va, vb = a2.var(ddof=1), b2.var(ddof=1)
    half = 0.0
    if va + vb > 0:
        diff, low, _, _, _ = welch(a2.mean(), va, len(a2), b2.mean(), vb, len(b2), level)
        half = float(diff - low)
    # means of identical values can differ in the last bits: that is not a move
    tolerance = 1e-9 * max(float(np.abs(np.concatenate([a, b])).max()), 1.0)
    size = max(abs(without), float(np.sqrt((va + vb) / 2)))
    threshold = max(CI_WIDTHS * half, MIN_SHARE * size, tolerance)
    moved = abs(float(a.mean() - b.mean()) - without)
    return Influence(without, half, threshold, moved > threshold)


def outside(values, low: float | None, high: float | None) -> int | None:
    """How many values lie outside [low, high] (the ends are plausible); None without a range."""
    if low is None or high is None:
        return None
    values = np.asarray(values, float)
    return int(((values < low) | (values > high)).sum())

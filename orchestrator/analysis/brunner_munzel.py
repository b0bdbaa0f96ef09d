"""The Brunner-Munzel test of a - d against b, and the shifts d it does not reject.

The Hodges-Lehmann shift estimates the median of the distribution of A - B: the d at which
P(A - d > B) + P(A - d = B) / 2 = 1/2, the relative effect Brunner and Munzel (2000) test.
Mann-Whitney's test, and the Moses interval read off its null distribution, assume more: that
the conditions' answers differ by a pure shift. Anchoring often narrows the treated answers as
well, and with equal medians but unequal spreads (10 answers at SD 4 against 40 at SD 1) the
Moses interval covered 0 in 83-86% of runs and Mann-Whitney called p < .05 in 14-16%.
Brunner-Munzel estimates the variance of the relative effect in each condition apart (its t
has Welch-like degrees of freedom), so it needs no equal spreads (94-95% and 5-6% there, see
tests/test_robust_interval.py); the interval here is the set of shifts d it does not reject,
so on continuous answers the p and the interval are one method and agree.

`BMShift(a, b).p(d)` is scipy.stats.brunnermunzel(a - d, b)'s two-sided p (t distribution),
computed from each answer's placement among the other condition's (count below, half of those
equal) over the distinct values with their counts: one search per shift, not a ranking of the
n + m answers, so a cell of 10^5 answers a side takes milliseconds per d. scipy.stats is not
imported (0.6 s); its p is scipy.special's t.

Two cases the formula leaves open (scipy returns NaN): when no answer of one condition lies
within the other's range, the variance estimate is 0, and the p is that of the rank order
itself, 2 / C(n + m, n), as an exact rank test's; when all answers are equal it is 1.
Below MIN_ANSWERS answers in a condition the t reference is too liberal (simulated 7-11% at
p < .05 under the null with 4 and 5 a side; up to 7% with 6 to 9, 5-6% from 10), and there is
no p or interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

MIN_ANSWERS = 6  # a condition's answers: below, no p or interval (see the module's note)
FEW_PAIRS = 64  # an interval end's last candidate differences: listed, not bisected further
MAX_STEPS = 2_000  # a search that has not ended by then returns NaN (never seen)


@dataclass(frozen=True)
class At:
    """The test of a - d against b: its p, the relative effect P(A - d > B) + P(A - d = B) / 2,
    that effect's standard error and the t's degrees of freedom (NaN when the standard error
    is 0), and the places of the distinct a - d among the distinct b (BMShift._places)."""

    d: float
    p: float
    relative: float
    se: float
    df: float
    left: np.ndarray
    right: np.ndarray


class BMShift:
    """The Brunner-Munzel test of a - d against b for any shift d, on the distinct values of a
    and b weighted by their counts."""

    def __init__(self, a, b):
        self.va, wa = np.unique(np.asarray(a, float), return_counts=True)
        self.vb, wb = np.unique(np.asarray(b, float), return_counts=True)
        self.wa, self.wb = wa.astype(float), wb.astype(float)
        self.n, self.m = int(wa.sum()), int(wb.sum())
        self.upto_b = np.concatenate([[0.0], np.cumsum(self.wb)])  # answers in vb[:j]
        # the p of two samples that do not overlap: the rank order's, as an exact rank test's
        self.apart = float(min(1.0, 2 / special.comb(self.n + self.m, self.n)))

    def _places(self, d: float) -> tuple[np.ndarray, np.ndarray]:
        """Per distinct a: how many distinct b lie below a - d (left), and the first distinct b
        above it (right; left + 1 where one equals it). Comparisons on a - d as the float it
        rounds to, as scipy would see the shifted answers."""
        x = self.va - d
        left = np.searchsorted(self.vb, x, side="left")
        at = np.minimum(left, len(self.vb) - 1)
        right = left + ((left < len(self.vb)) & (self.vb[at] == x))
        return left, right

    def at(self, d: float = 0.0) -> At:
        """The Brunner-Munzel test of a - d against b (p NaN: fewer than 2 answers a side)."""
        n, m = self.n, self.m
        left, right = self._places(d)
        # a's placements among b: those below, half those equal
        place_a = (self.upto_b[left] + self.upto_b[right]) / 2
        relative = float((self.wa * place_a).sum() / n / m)
        if min(n, m) < 2:
            return At(d, np.nan, relative, np.nan, np.nan, left, right)
        # b's placements among a - d: the a with right <= j lie below vb[j]; left == j < right
        # are equal to it
        below = np.cumsum(np.bincount(right, self.wa, len(self.vb) + 1))[: len(self.vb)]
        equal = np.bincount(left, self.wa * (right > left), len(self.vb) + 1)[: len(self.vb)]
        place_b = below + equal / 2
        # sums, not `@`: BLAS would start threads for each product of 10^5 values
        s_a = float((self.wa * (place_a - relative * m) ** 2).sum()) / (n - 1)
        mean_b = float((self.wb * place_b).sum()) / m
        s_b = float((self.wb * (place_b - mean_b) ** 2).sum()) / (m - 1)
        spread = n * s_a + m * s_b
        if spread == 0:  # every answer placed alike: the samples do not overlap, or all tie
            p = 1.0 if relative == 0.5 else self.apart
            return At(d, p, relative, 0.0, np.nan, left, right)
        t = n * m * (relative - 0.5) / np.sqrt(spread)
        df = spread**2 / ((n * s_a) ** 2 / (n - 1) + (m * s_b) ** 2 / (m - 1))
        p = float(min(1.0, 2 * special.stdtr(df, -abs(t))))
        return At(d, p, relative, float(np.sqrt(spread) / (n * m)), float(df), left, right)

    def p(self, d: float = 0.0) -> float:
        """The two-sided p of the Brunner-Munzel test of a - d against b."""
        return self.at(d).p

    def _between(self, lo: At, hi: At) -> tuple[np.ndarray, bool, float]:
        """The distinct differences va_i - vb_j of the pairs whose order changes between the
        shifts lo.d < hi.d (b below a - hi.d, then not above a - lo.d): all of them when they
        are at most FEW_PAIRS pairs, else the least and the greatest (one value when they all
        tie, as round answers do); whether they are all; and how far apart two of them may be
        and still be one difference rounded two ways (1.7 - 2 and 2.7 - 3 differ in the last
        bits), from the size of the answers that form them."""
        counts = np.maximum(lo.right - hi.left, 0)
        if counts.sum() > FEW_PAIRS:
            rows = np.flatnonzero(counts)
            rows, cols = np.tile(rows, 2), np.concatenate([lo.right[rows] - 1, hi.left[rows]])
            listed = False
        else:
            rows = np.repeat(np.arange(len(self.va)), counts)
            starts = np.cumsum(counts) - counts
            cols = hi.left[rows] + np.arange(counts.sum()) - np.repeat(starts, counts)
            listed = True
        with np.errstate(invalid="ignore"):  # inf against inf ties at every shift: no order
            found = self.va[rows] - self.vb[cols]  # changes, and the difference is NaN
        finite = np.isfinite(found)
        found, rows, cols = found[finite], rows[finite], cols[finite]
        if not len(found):
            return found, listed, 0.0
        if not listed:
            found = np.array([found.min(), found.max()])
        size = max(np.abs(self.va[rows]).max(), np.abs(self.vb[cols]).max())
        return np.unique(found), listed, float(4 * np.spacing(size))

    def _beside(self, center: At, side: float) -> float:
        """Halfway from center.d to the nearest pairwise difference below it (side -1) or above
        it (side 1); one beyond center.d when there is none."""
        if side > 0:  # the largest b below a - d gives the difference just above d
            rows = center.left > 0
            near = self.va[rows] - self.vb[center.left[rows] - 1]
            return float(center.d + (near.min() - center.d) / 2) if rows.any() else center.d + 1
        rows = center.right < len(self.vb)  # the smallest b above a - d: just below d
        near = self.va[rows] - self.vb[center.right[rows]]
        return float(center.d + (near.max() - center.d) / 2) if rows.any() else center.d - 1

    def end(self, inside: At, outside: At, alpha: float, rejects: Callable[[At], bool]) -> float:
        """The end of the shifts not rejected at `alpha` (`rejects`: on this side), between
        `inside` (not rejected) and `outside` (rejected): the pairwise difference at which the
        test starts rejecting.

        The p changes only where a pair's order does, so the search narrows the gap until one
        difference is left in it: that difference is the end (the interval is closed). Each
        step goes where the relative effect, interpolated linearly, would meet its critical
        value (regula falsi, Illinois variant: the side kept twice counts half), or halfway
        when that is no step; once few differences are left, to the middle one of them."""
        tcrit = special.stdtrit(inside.df, 1 - alpha / 2) if inside.se > 0 else 0.0

        def gap(at: At) -> float:  # 0 where the relative effect meets its critical value
            return at.relative - 0.5 - np.sign(inside.d - outside.d) * tcrit * at.se

        g_in, g_out = gap(inside), gap(outside)
        kept = ""  # the end the last step kept
        for _ in range(MAX_STEPS):
            lo, hi = sorted((inside, outside), key=lambda at: at.d)
            found, listed, rounding = self._between(lo, hi)
            if len(found) and found[-1] - found[0] <= rounding:  # one difference is left
                return float(found[0] if outside.d < inside.d else found[-1])  # the wider
            mid = lo.d + (hi.d - lo.d) / 2
            if g_in != g_out:
                guess = inside.d + (outside.d - inside.d) * g_in / (g_in - g_out)
                mid = guess if lo.d < guess < hi.d else mid
            if listed:  # few left: split at the middle one, not at a float
                strict = found[(found > lo.d) & (found < hi.d)]
                if len(strict):
                    mid = float(strict[len(strict) // 2])
            if not lo.d < mid < hi.d:  # neighbouring floats: no difference lies between them
                return float(inside.d)
            new = self.at(mid)
            if not rejects(new):
                inside, g_in = new, gap(new)
                g_out, kept = (g_out / 2 if kept == "outside" else g_out), "outside"
            else:
                outside, g_out = new, gap(new)
                g_in, kept = (g_in / 2 if kept == "inside" else g_in), "inside"
        return float("nan")

    def interval(self, estimate: float, level: float = 0.95) -> tuple[float, float]:
        """The shifts the test does not reject at 1 - level, as [low, high] around `estimate`
        (the Hodges-Lehmann shift, the median of the pairwise differences); NaN when a
        condition has fewer than MIN_ANSWERS answers.

        The interval is closed, as the Moses interval was: low is the least shift at or just
        above which the test no longer finds a - d too high (relative effect above 1/2 at
        p < alpha), high the greatest at or just below which it no longer finds it too low.
        On continuous answers that is where p crosses alpha. Where answers tie (ratings,
        round numbers) the relative effect can jump over 1/2 at the median difference: the
        test rejects just below it (too high) and just above it (too low), and at it on a
        large sample, yet it is the median of A - B; a two-sided inversion would give no
        interval at all there, this one gives [median, median]."""
        alpha = 1 - level
        if min(self.n, self.m) < MIN_ANSWERS:
            return float("nan"), float("nan")
        center = self.at(estimate)
        # the range of the differences: shifted by it, the samples no longer overlap (answers
        # of +-inf never do, and would make it infinite)
        fa, fb = self.va[np.isfinite(self.va)], self.vb[np.isfinite(self.vb)]
        if not len(fa) or not len(fb):
            return float("nan"), float("nan")
        span = max(float(fa[-1] - fb[0] - (fa[0] - fb[-1])), 1.0)
        ends = []
        for side in (-1.0, 1.0):

            def rejects(at: At, side: float = side) -> bool:  # a - d too high (side -1) or low
                return at.p < alpha and (at.relative - 0.5) * side < 0

            # not rejected: the estimate, or the shifts just beyond it, where at most half
            # the differences lie beyond on that side
            inside = center if not rejects(center) else self.at(self._beside(center, -side))
            # apart: p = 2 / C(n + m, n) < alpha
            step = span
            while not rejects(far := self.at(center.d + side * step)):
                step *= 2
                if not np.isfinite(step):
                    return float("nan"), float("nan")
            ends.append(self.end(inside, far, alpha, rejects))
        return ends[0], ends[1]

"""The robust shift's p and interval when the conditions' spreads differ (issue 45, item 4).

The Hodges-Lehmann shift estimates the median of A - B. The Moses interval and Mann-Whitney p
it came with assume a pure shift: anchoring often narrows the treated answers as well, and with
equal medians (estimand 0) the Moses interval covered 0 in 83% of runs of 10 answers at SD 4
against 40 at SD 1, Mann-Whitney rejecting 16%. The Brunner-Munzel test and the shifts it does
not reject hold their level there; they are checked against scipy.stats.brunnermunzel, and the
interval against brute force over every pairwise difference.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import special, stats

from orchestrator.analysis import robust

# (answers, SD) of a, then of b: normal answers, equal medians; the three settings
UNEQUAL = [(10, 4, 40, 1), (15, 5, 60, 1), (20, 1, 20, 4)]


def _runs(n, sd_a, m, sd_b, runs: int, shift: float = 0.0, seed: int = 45):
    """(coverage of `shift`, share of p < 0.05) over `runs` seeded samples."""
    rng = np.random.default_rng(seed)
    found = [
        robust.hodges_lehmann(rng.normal(shift, sd_a, n), rng.normal(0, sd_b, m))
        for _ in range(runs)
    ]
    covered = np.mean([s.low <= shift <= s.high for s in found])
    return covered, np.mean([s.p < 0.05 for s in found])


def _scipy_p(a, b, d: float = 0.0) -> float:
    with warnings.catch_warnings():  # scipy warns, and gives NaN, when the samples are apart
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.brunnermunzel(a - d, b).pvalue)


def test_unequal_spreads_keep_the_interval_and_the_p_at_their_level():
    """The issue's first setting, 600 runs (the Moses interval: 82.5% and Mann-Whitney 16.5%
    on these very samples; here 94.2% and 5.8%). The bounds sit 2.5 standard errors from a
    95% level and 9 from the old figures."""
    covered, rejected = _runs(10, 4, 40, 1, 600)
    assert covered >= 0.92, f"covered 0 in {covered:.1%}"
    assert rejected <= 0.08, f"p < 0.05 in {rejected:.1%}"


@pytest.mark.slow
@pytest.mark.parametrize(("n", "sd_a", "m", "sd_b"), [*UNEQUAL, (20, 1, 20, 1)])
def test_coverage_under_unequal_spreads_over_2000_runs(n, sd_a, m, sd_b):
    """2,000 runs a setting tell 5% from 10% (a standard error of 0.5 points). Measured: 95.1,
    94.4, 95.4 and 94.4% coverage; 4.9, 5.6, 4.7 and 5.7% p < 0.05 (the last: equal spreads).
    The Moses interval and Mann-Whitney p on the same runs: 85.2, 82.1, 92.9 and 94.8%;
    14.4, 17.9, 7.2 and 5.3%."""
    covered, rejected = _runs(n, sd_a, m, sd_b, 2000)
    assert covered >= 0.93 and rejected <= 0.065, (covered, rejected)


def _ratings(n: int, sd: float, rng) -> np.ndarray:
    return np.clip(np.round(rng.normal(4, sd, n)), 1, 7)


# the docs table's other rows: (name, answers of a and b from a generator, true shift, p bound)
OTHER_SETTINGS = {
    "pure shift of 3": (lambda r: (r.normal(3, 1, 20), r.normal(0, 1, 20)), 3.0, None),
    "lognormal, equal medians": (
        lambda r: (np.exp(r.normal(0, 1, 20)), np.exp(r.normal(0, 0.5, 20))),
        0.0,
        0.065,
    ),
    "6 at sd 4 vs 24 at sd 1": (lambda r: (r.normal(0, 4, 6), r.normal(0, 1, 24)), 0.0, 0.065),
    # 6 to 9 answers a side: the t reference rejects up to 7% (docs/statistics.md)
    "8 vs 8, sd 4 vs sd 1": (lambda r: (r.normal(0, 4, 8), r.normal(0, 1, 8)), 0.0, 0.085),
    "ratings 1-7": (lambda r: (_ratings(10, 2.5, r), _ratings(40, 0.7, r)), 0.0, 0.065),
}


@pytest.mark.slow
@pytest.mark.parametrize("setting", list(OTHER_SETTINGS))
def test_the_docs_other_settings_over_2000_runs(setting):
    """The rest of docs/statistics.md's table at 2,000 runs (the table: 10,000). Coverage of
    the true shift at least 93%; p < .05 within its bound where the shift is 0."""
    draw, shift, bound = OTHER_SETTINGS[setting]
    rng = np.random.default_rng(45)
    found = [robust.hodges_lehmann(*draw(rng)) for _ in range(2000)]
    covered = np.mean([s.low <= shift <= s.high for s in found])
    rejected = np.mean([s.p < 0.05 for s in found])
    print(f"{setting}: coverage {covered:.1%}, p < .05 {rejected:.1%}")
    assert covered >= 0.93, covered
    assert bound is None or rejected <= bound, rejected


def test_a_planted_shift_is_found():
    """Power: a shift of one SD at 20 answers a side is found in 86% of runs (Welch's t: 87%),
    and of 4 (one SD of the wider condition) at 10 against 40 with unequal spreads in 73%;
    the pure shift's coverage is tested in test_extreme_answers.py."""
    covered, found = _runs(20, 1, 20, 1, 400, shift=1.0, seed=7)
    assert found >= 0.8 and covered >= 0.92
    covered, found = _runs(10, 4, 40, 1, 400, shift=4.0, seed=7)
    assert found >= 0.65 and covered >= 0.92


def test_the_p_is_scipys_brunner_munzel_at_any_shift():
    """On continuous answers, ratings full of ties, unequal sizes, one condition constant and
    answers of 1e16 with gaps of a half: the p of a - d against b is scipy's."""
    rng = np.random.default_rng(12)
    for trial in range(200):
        n, m = (int(x) for x in rng.integers(2, 80, 2))
        if trial % 4 == 0:
            a, b = rng.integers(1, 8, n) * 1.0, rng.integers(1, 8, m) * 1.0
        elif trial % 4 == 1:
            a, b = np.full(n, 4.0), rng.integers(1, 8, m) * 1.0
        elif trial % 4 == 2:
            a, b = 1e16 + rng.integers(-40, 40, n) * 0.5, 1e16 + rng.integers(-40, 40, m) * 2.0
        else:
            a, b = rng.lognormal(6, rng.choice([0.5, 2]), n), rng.lognormal(6.1, 1, m)
        test = robust.BMShift(a, b)
        for d in (0.0, float(np.median(a) - np.median(b)), 1.5):
            expected = _scipy_p(a, b, d)
            if not np.isnan(expected):
                assert test.p(d) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_samples_that_do_not_overlap_get_the_rank_orders_p():
    """Where no answer of one condition falls within the other's range, scipy's variance
    estimate is 0 and its p NaN; here it is the rank order's own p, 2 / C(n + m, n), as the
    exact Mann-Whitney test gives it, and an interval still comes."""
    a, b = np.arange(6.0) + 10, np.arange(8.0)
    assert np.isnan(_scipy_p(a, b))
    exact = stats.mannwhitneyu(a, b, method="exact").pvalue
    assert robust.BMShift(a, b).p() == pytest.approx(exact) == 2 / special.comb(14, 6)
    shift = robust.hodges_lehmann(a, b)
    assert shift.p == pytest.approx(exact) and shift.low <= shift.estimate <= shift.high
    assert shift.low > 0  # the samples are apart: the shift is not 0


def _brute_interval(a, b) -> tuple[float, float]:
    """From scipy at every pairwise difference and between each two: the least difference at
    which, or just above which, the test no longer finds a - d too high (p < 0.05 with a - d
    above b), and the greatest at or just below which it no longer finds it too low."""
    d = np.unique(np.subtract.outer(a, b))
    between = np.concatenate([[d[0] - 1], (d[1:] + d[:-1]) / 2, [d[-1] + 1]])

    def too(x: float) -> tuple[bool, bool]:  # (too high, too low)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.brunnermunzel(a - x, b)
        p = 0.0 if np.isnan(result.pvalue) else result.pvalue  # apart: 2 / C(n + m, n)
        return p < 0.05 and result.statistic < 0, p < 0.05 and result.statistic > 0

    at, gaps = [too(x) for x in d], [too(x) for x in between]
    low = min(x for i, x in enumerate(d) if not at[i][0] or not gaps[i + 1][0])
    high = max(x for i, x in enumerate(d) if not at[i][1] or not gaps[i][1])
    return low, high


@pytest.mark.parametrize("kind", ["continuous", "unequal spreads", "ratings"])
def test_the_interval_is_the_closed_set_of_shifts_the_test_does_not_reject(kind):
    """The ends, checked by brute force: on continuous answers they are where scipy's p crosses
    0.05; where answers tie, the interval is closed over the shifts just beside an end."""
    rng = np.random.default_rng({"continuous": 1, "unequal spreads": 2, "ratings": 3}[kind])
    for _ in range(12):
        n, m = (int(x) for x in rng.integers(6, 13, 2))
        if kind == "ratings":
            a, b = rng.integers(1, 8, n) * 1.0, rng.integers(2, 8, m) * 1.0
        else:
            a, b = rng.normal(0, 3 if kind == "unequal spreads" else 1, n), rng.normal(0.5, 1, m)
        shift = robust.hodges_lehmann(a, b)
        assert (shift.low, shift.high) == _brute_interval(a, b)
        if kind != "ratings":  # p crosses 0.05 at the ends
            gaps = np.diff(np.unique(np.subtract.outer(a, b))).min()
            eps = gaps / 4
            assert _scipy_p(a, b, shift.low - eps) < 0.05 <= _scipy_p(a, b, shift.low + eps)
            assert _scipy_p(a, b, shift.high + eps) < 0.05 <= _scipy_p(a, b, shift.high - eps)


def test_a_large_cell_is_searched_without_its_differences():
    """20,000 answers a side (4e8 differences, never formed): scipy's p, and ends where its p
    crosses 0.05. The search evaluates the test at a few dozen shifts, each one search of the
    distinct answers."""
    rng = np.random.default_rng(9)
    a, b = rng.lognormal(6, 1, 20_000), rng.lognormal(6.02, 0.7, 20_000)
    shift = robust.hodges_lehmann(a, b)
    assert shift.p == pytest.approx(_scipy_p(a, b), rel=1e-9)
    assert shift.low < shift.estimate < shift.high
    # differences lie 1e-5 apart on average here: 1e-6 out is rejected, at the end or 1e-9 in
    # (the shifts just beside it, as the interval is closed) is not
    for end, out in ((shift.low, -1.0), (shift.high, 1.0)):
        assert _scipy_p(a, b, end + out * 1e-6) < 0.05
        assert max(_scipy_p(a, b, end), _scipy_p(a, b, end - out * 1e-9)) >= 0.05


def test_ties_at_the_median_difference_keep_it_in_the_interval():
    """5,000 answers of 3 or 4 (55% 4) against 4,000 of 3 (50 of 2): A - B is 1 with
    probability 0.55, so its median is 1, but the relative effect jumps from 0.55 (just below
    1) to 0.28 (at 1) to 0.01 (just above), and at this size the test rejects all three. A
    two-sided inversion gives no interval; this one gives [1, 1], as the Moses interval did."""
    rng = np.random.default_rng(1)
    a = rng.choice([3.0, 4.0], 5000, p=[0.45, 0.55])
    b = np.full(4000, 3.0)
    b[:50] = 2.0
    assert all(_scipy_p(a, b, d) < 0.05 for d in (0.5, 1.0, 1.5))
    shift = robust.hodges_lehmann(a, b)
    assert (shift.estimate, shift.low, shift.high) == (1.0, 1.0, 1.0)


def test_too_few_answers_or_no_spread():
    """Below MIN_ANSWERS a condition the t reference is too liberal (7-11% at p < .05 under the
    null with 4 and 5 answers a side): the shift is given, no p or interval. Answers all equal:
    nothing to rank (no p), and the one shift there is, 0."""
    assert robust.MIN_ANSWERS == 6
    few = robust.hodges_lehmann([1.0, 2.0, 3.0, 4.0, 5.0], np.arange(20.0))
    assert few.estimate == np.median(np.subtract.outer([1, 2, 3, 4, 5], np.arange(20)))
    assert np.isnan([few.low, few.high, few.p, few.level]).all()
    same = robust.hodges_lehmann(np.full(10, 3.0), np.full(12, 3.0))
    assert (same.estimate, same.low, same.high, same.level) == (0.0, 0.0, 0.0, 0.95)
    assert np.isnan(same.p)
    constant, ratings = np.full(10, 4.0), np.arange(1.0, 8.0).repeat(2)
    one_constant = robust.hodges_lehmann(constant, ratings)
    assert one_constant.p == pytest.approx(_scipy_p(constant, ratings))
    assert one_constant.low <= 0 <= one_constant.high


def test_infinite_answers_rank_last_and_leave_the_interval_its_ends():
    """An answer beyond the floats (inf) ranks above every other, as scipy ranks it, and never
    changes order with another inf: the interval's ends stay pairwise differences of the rest.
    A NaN answer has no rank: no p or interval."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.3, 1, 20), rng.normal(0, 2, 25)
    a[0], b[:2] = np.inf, (np.inf, -np.inf)
    shift = robust.hodges_lehmann(a, b)
    assert shift.p == pytest.approx(_scipy_p(a, b), rel=1e-9)
    finite = np.subtract.outer(a[1:], b[2:])
    assert shift.low in finite and shift.high in finite
    assert shift.low <= shift.estimate <= shift.high
    a[1] = np.nan
    assert np.isnan([robust.hodges_lehmann(a, b).p, robust.hodges_lehmann(a, b).low]).all()

"""The statistics against scipy and statsmodels on fixed data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest

from orchestrator.analysis.stats import newcombe, welch, wilson

A = np.array([1210.0, 1100, 1350, 990, 1200, 1275, 1180, 1010, 1405, 1150])
B = np.array([880.0, 910, 760, 1000, 850, 905, 790, 940])


def test_welch_matches_scipy():
    diff, low, high, p, df = welch(A.mean(), A.var(ddof=1), len(A), B.mean(), B.var(ddof=1), len(B))
    ref = stats.ttest_ind(A, B, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert diff == pytest.approx(A.mean() - B.mean())
    assert p == pytest.approx(ref.pvalue, rel=1e-9)
    assert df == pytest.approx(ref.df, rel=1e-9)
    assert (low, high) == (pytest.approx(ci.low, rel=1e-9), pytest.approx(ci.high, rel=1e-9))


def test_welch_is_vectorised_and_honest_about_degenerate_rows():
    diff, low, high, p, _ = welch(
        [5.0, 4.0, 3.0],
        [1.0, 0.0, 1.0],
        [10, 10, 1],
        [4.0, 4.0, 2.0],
        [1.0, 0.0, 1.0],
        [10, 10, 10],
    )
    assert diff.tolist() == [1.0, 0.0, 1.0]
    assert not np.isnan(p[0])
    assert np.isnan(p[1]) and np.isnan(low[1])  # no variance at all: no interval pretended
    assert np.isnan(p[2]) and np.isnan(high[2])  # one answer in a condition


@pytest.mark.parametrize(
    ("ca", "na", "cb", "nb"), [(14, 20, 9, 20), (20, 20, 0, 20), (3, 25, 11, 30), (0, 5, 0, 7)]
)
def test_newcombe_matches_statsmodels(ca, na, cb, nb):
    diff, low, high, p = newcombe(ca, na, cb, nb)
    ref_low, ref_high = confint_proportions_2indep(ca, na, cb, nb, method="newcomb", compare="diff")
    assert diff == pytest.approx(ca / na - cb / nb)
    assert (low, high) == (pytest.approx(ref_low, abs=1e-10), pytest.approx(ref_high, abs=1e-10))
    if 0 < ca + cb < na + nb:
        assert p == pytest.approx(proportions_ztest([ca, cb], [na, nb])[1], rel=1e-9)
    else:
        assert p == 1.0  # identical all-or-nothing answers: no evidence of a difference


def test_wilson_matches_statsmodels():
    from statsmodels.stats.proportion import proportion_confint

    low, high = wilson(7, 19)
    ref = proportion_confint(7, 19, method="wilson")
    assert (low, high) == (pytest.approx(ref[0], rel=1e-12), pytest.approx(ref[1], rel=1e-12))


def test_numbers_print_short_even_when_a_model_answers_absurdly():
    from orchestrator.report.format import fmt

    assert (
        fmt(0.123456) == "0.123" and fmt(1234.4) == "1,234" and fmt(-987654321.0) == "-987,654,321"
    )
    assert fmt(1.5e20) == "1.500e+20" and fmt(-4.6e17) == "-4.600e+17"
    assert fmt(None) == "–" and fmt(float("nan")) == "–"

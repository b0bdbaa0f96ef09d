"""The Instructed to Bias statistics on known data: the Student t-test against scipy, the Wald
error and the difference-in-differences against statsmodels, and the false-positive rates of
the t-test and of the difference-in-differences under the null, run through the same table
code as the analysis (analysis.score_tests, compare.differences)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep

from orchestrator.studies.instructed.analysis import score_tests
from orchestrator.studies.instructed.compare import differences
from orchestrator.studies.instructed.inference import difference, share_difference_se, student

REPS = (
    4000  # the false-positive rate's standard error is 0.0034: a doubled rate (0.10) is 15 SEs out
)


def zero_one(count: int, n: int) -> np.ndarray:
    return np.r_[np.ones(count), np.zeros(n - count)]


@pytest.mark.parametrize(
    ("ka", "na", "kb", "nb"),
    [
        (816, 2592, 211, 432),
        (238, 504, 170, 336),
        (95, 168, 152, 336),
        (3, 10, 7, 9),
        (1, 2, 0, 1),
        (0, 48, 5, 8),
    ],
)
def test_the_t_test_is_scipys_student_t_test_on_the_0_1_answers(ka, na, kb, nb):
    t, df, p = student(ka, na, kb, nb)
    ref = stats.ttest_ind(zero_one(ka, na), zero_one(kb, nb), equal_var=True)
    assert t == pytest.approx(ref.statistic, rel=1e-10)
    assert p == pytest.approx(ref.pvalue, rel=1e-9)
    assert df == ref.df == na + nb - 2


def test_the_t_test_is_vectorised_and_says_when_there_is_no_test():
    t, df, p = student([5, 4, 4, 3, 0], [10, 4, 4, 0, 1], [2, 0, 4, 1, 0], [10, 4, 4, 5, 1])
    ref = stats.ttest_ind(zero_one(5, 10), zero_one(2, 10))
    assert t[0] == pytest.approx(ref.statistic) and p[0] == pytest.approx(ref.pvalue)
    assert t[1] == np.inf and p[1] == 0.0  # all targets against none: scipy says the same
    assert np.isnan(t[2]) and np.isnan(p[2])  # the same constant answers: nothing to test
    assert np.isnan(t[3]) and np.isnan(df[3])  # an empty condition
    assert np.isnan(p[4])  # one answer each: no degree of freedom


def test_the_wald_error_and_the_difference_match_statsmodels():
    se = share_difference_se(95, 168, 152, 336)
    low, high = confint_proportions_2indep(95, 168, 152, 336, method="wald", compare="diff")
    assert 1.959964 * se == pytest.approx((high - low) / 2, rel=1e-6)
    did, lo, hi, p = difference(0.30, 0.04, 0.10, 0.03)
    assert did == pytest.approx(0.2) and hi - did == pytest.approx(stats.norm.ppf(0.975) * 0.05)
    assert p == pytest.approx(2 * stats.norm.sf(0.2 / 0.05))
    assert np.isnan(difference(0.5, 0.0, 0.5, 0.0)[3])  # exact scores: no test


def test_the_agresti_caffo_error_matches_statsmodels_and_is_never_zero():
    se = share_difference_se(95, 168, 152, 336, add=1)
    low, high = confint_proportions_2indep(
        95, 168, 152, 336, method="agresti-caffo", compare="diff"
    )
    assert 1.959964 * se == pytest.approx((high - low) / 2, rel=1e-6)
    assert share_difference_se(11, 11, 10, 10) == 0  # Wald: all answers alike claim no error
    assert share_difference_se(11, 11, 10, 10, add=1) > 0.1


def test_two_models_answering_every_item_alike_get_an_interval_not_zero_width():
    """Both models choose the target in every treatment and control answer (n = 11 and 10, as
    a small local run gives): their difference is 0, but not known to be exactly 0."""
    row = {
        "strategy": "baseline",
        "score": "Belief Valid",
        "hits_treatment": 11,
        "n_treatment": 11,
        "hits_control": 10,
        "n_control": 10,
        "n_decoy_treatment": 0,
    }
    wide = pl.DataFrame([{**row, "modelKey": k, "model": k} for k in ("a", "b")])
    (did,) = differences(score_tests(wide)).iter_rows(named=True)
    assert did["did"] == 0 and did["ci_low"] < -0.2 and did["ci_high"] > 0.2 and did["p"] == 1


def _wide(rng, n_t: int, p_t: float, n_c: int, p_c: float, reps: int = REPS) -> pl.DataFrame:
    """`reps` independent treatment/control samples as the analysis counts them."""
    hits_t, hits_c = rng.binomial(n_t, p_t, reps), rng.binomial(n_c, p_c, reps)
    return pl.DataFrame(
        {
            "score": [f"s{i}" for i in range(reps)],
            "hits_treatment": hits_t,
            "n_treatment": np.full(reps, n_t),
            "n_decoy_treatment": np.zeros(reps, int),
            "hits_control": hits_c,
            "n_control": np.full(reps, n_c),
        }
    )


@pytest.mark.parametrize(
    ("n_t", "n_c", "share"), [(2592, 432, 0.5), (504, 336, 0.3), (168, 336, 0.8)]
)
def test_the_t_test_holds_its_level_under_the_null(n_t, n_c, share):
    """The study's own sample sizes (decoy, certainty, belief), equal shares in both conditions."""
    table = score_tests(_wide(np.random.default_rng(7), n_t, share, n_c, share))
    rate = (table["p_t"] < 0.05).mean()
    assert 0.035 < rate < 0.065, rate
    newcombe_rate = ((table["ci_low"] > 0) | (table["ci_high"] < 0)).mean()
    assert 0.035 < newcombe_rate < 0.065, newcombe_rate


def _scores(wide: pl.DataFrame, key: str) -> pl.DataFrame:
    return score_tests(wide).with_columns(
        modelKey=pl.lit(key), model=pl.lit(key), strategy=pl.lit("baseline")
    )


@pytest.mark.parametrize(("a", "b"), [((0.6, 0.4), (0.45, 0.25)), ((0.34, 0.5), (0.2, 0.36))])
def test_the_difference_in_differences_holds_its_level_under_the_null(a, b):
    """Two models with the same bias score (0.2, or the -0.16 of a decoy), each from its own
    shares: the difference is called in about 5% of replications, not more, not fewer."""
    rng = np.random.default_rng(11)
    first, second = (
        _scores(_wide(rng, 2592, t, 432, c), key) for (t, c), key in ((a, "m1"), (b, "m2"))
    )
    did = differences(pl.concat([first, second]))
    assert did.height == REPS and did["model_a"].unique().to_list() == ["m1"]
    rate = (did["p"] < 0.05).mean()
    assert 0.035 < rate < 0.065, rate
    covered = ((did["ci_low"] <= 0) & (did["ci_high"] >= 0)).mean()
    assert 0.935 < covered < 0.965, covered


def test_the_difference_in_differences_finds_a_planted_difference():
    rng = np.random.default_rng(12)
    first = _scores(_wide(rng, 2592, 0.7, 432, 0.5, reps=500), "m1")  # bias score 0.2
    second = _scores(_wide(rng, 2592, 0.5, 432, 0.5, reps=500), "m2")  # none
    did = differences(pl.concat([first, second]))
    assert did["did"].mean() == pytest.approx(0.2, abs=0.01)
    assert (did["p"] < 0.05).mean() > 0.95  # se 0.036: z = 5.5
    covered = ((did["ci_low"] <= 0.2) & (did["ci_high"] >= 0.2)).mean()
    assert 0.92 < covered < 0.98, covered


def test_the_attraction_measure_leaves_the_decoy_answers_out():
    wide = pl.DataFrame(
        {
            "score": ["Decoy Cheaper", "Certainty"],
            "hits_treatment": [30, 30],
            "n_treatment": [90, 90],
            "n_decoy_treatment": [30, 0],
            "hits_control": [20, 20],
            "n_control": [40, 40],
        }
    )
    r = score_tests(wide).to_dicts()
    assert r[0]["bias_score"] == pytest.approx(30 / 90 - 0.5)  # a random chooser: -1/6
    assert r[0]["attraction"] == pytest.approx(0.0, abs=1e-15)  # among target or competitor: none
    ref = confint_proportions_2indep(30, 60, 20, 40, method="newcomb", compare="diff")
    assert (r[0]["attraction_ci_low"], r[0]["attraction_ci_high"]) == pytest.approx(ref, abs=1e-10)
    assert r[1]["attraction"] is None and r[1]["attraction_p"] is None  # not a decoy score

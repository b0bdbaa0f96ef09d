"""The random-intercept logistic GLMM against statsmodels, on seeded simulated data."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

from orchestrator.analysis.glmm import binomial_random_intercept


def simulate(rng: np.random.Generator, k: int, sigma: float, beta0: float, beta1: float,
             n: int) -> tuple[np.ndarray, np.ndarray]:
    """(K, 2) successes and trials from the model itself: control in column 0, treatment in 1."""
    u = rng.normal(0.0, sigma, size=(k, 1))
    p = 1 / (1 + np.exp(-(beta0 + beta1 * np.array([[0.0, 1.0]]) + u)))
    trials = np.full((k, 2), n)
    return rng.binomial(trials, p), trials


def expand(successes: np.ndarray, trials: np.ndarray) -> pd.DataFrame:
    """One 0/1 row per answer, as the statsmodels formula interfaces want."""
    y, condition, variant = [], [], []
    for k, c in np.ndindex(successes.shape):
        s, n = int(successes[k, c]), int(trials[k, c])
        y += [1] * s + [0] * (n - s)
        condition += [c] * n
        variant += [k] * n
    return pd.DataFrame({"y": y, "condition": condition, "variant": variant})


def test_without_variant_effect_it_is_the_plain_logistic_regression():
    # identical variants: the between-variant variance is exactly zero at the optimum
    rng = np.random.default_rng(7)
    row = rng.binomial([5000, 5000], [0.3, 0.45])
    successes, trials = np.tile(row, (6, 1)), np.full((6, 2), 5000)
    fit = binomial_random_intercept(successes, trials)
    # one row per (condition, outcome), weighted by its count over all variants
    counts = np.concatenate([successes.sum(0), (trials - successes).sum(0)])
    glm = sm.GLM(np.array([1.0, 1, 0, 0]), sm.add_constant(np.array([0.0, 1, 0, 1])),
                 family=sm.families.Binomial(), freq_weights=counts).fit()
    assert fit.converged and fit.degenerate is None
    assert fit.sigma == 0.0
    assert fit.beta1 == pytest.approx(glm.params[1], rel=1e-3)
    assert fit.beta0 == pytest.approx(glm.params[0], rel=1e-3)
    assert fit.se_beta1 == pytest.approx(glm.bse[1], rel=0.02)


def test_random_intercept_matches_statsmodels_bayes_mixed_glm():
    rng = np.random.default_rng(2024)
    successes, trials = simulate(rng, k=8, sigma=0.8, beta0=-0.3, beta1=1.0, n=200)
    fit = binomial_random_intercept(successes, trials)
    vb = BinomialBayesMixedGLM.from_formula(
        "y ~ condition", {"variant": "0 + C(variant)"}, expand(successes, trials)).fit_vb()
    assert fit.converged
    assert fit.beta0 == pytest.approx(vb.fe_mean[0], abs=0.1)
    assert fit.beta1 == pytest.approx(vb.fe_mean[1], abs=0.1)
    assert 0.2 < fit.sigma < 2.0
    assert fit.or_ci_low < math.exp(1.0) < fit.or_ci_high
    assert fit.p_value < 1e-6  # 1,600 answers per condition: a log odds ratio of 1 is plain
    # adaptive quadrature has converged by 20 nodes (the fixed sqrt(2)*sigma rule is off by 0.1+ here)
    finer = binomial_random_intercept(successes, trials, nodes=60)
    assert (finer.beta0, finer.beta1, finer.sigma) == pytest.approx((fit.beta0, fit.beta1, fit.sigma), abs=1e-5)


def test_wald_test_holds_its_size_under_the_null():
    rng = np.random.default_rng(11)
    fits = [binomial_random_intercept(*simulate(rng, k=5, sigma=0.5, beta0=-0.2, beta1=0.0, n=60))
            for _ in range(100)]
    assert all(f.degenerate is None and f.converged for f in fits)
    rejection_rate = np.mean([f.p_value < 0.05 for f in fits])
    assert rejection_rate <= 0.12


@pytest.mark.parametrize(("successes", "trials", "reason"), [
    ([[0, 0], [0, 0], [0, 0]], [[20, 20], [20, 20], [20, 20]], "no variation in the outcome"),
    ([[0, 20], [0, 20], [0, 20]], [[20, 20], [20, 20], [20, 20]], "complete separation"),
    ([[0, 7], [0, 12]], [[20, 20], [20, 20]], "complete separation"),  # quasi-complete
    ([[5, 12]], [[20, 20]], "fewer than 2 variants"),
])
def test_degenerate_inputs_are_named_not_fitted(successes, trials, reason):
    fit = binomial_random_intercept(np.array(successes), np.array(trials))
    assert fit.degenerate == reason
    assert not fit.converged
    numeric = [fit.beta0, fit.beta1, fit.se_beta1, fit.z, fit.p_value, fit.odds_ratio,
               fit.or_ci_low, fit.or_ci_high, fit.sigma]
    assert all(math.isnan(v) for v in numeric)


def test_unbounded_sigma_is_reported_as_not_converged():
    # every variant answers the same in both conditions: the likelihood rises with sigma for ever
    fit = binomial_random_intercept(np.array([[0, 0], [10, 10], [0, 0], [10, 10]]), np.full((4, 2), 10))
    assert fit.degenerate is None and not fit.converged
    assert fit.sigma == pytest.approx(math.exp(3.0))


def test_odds_ratio_and_interval_are_exponentiated_wald():
    rng = np.random.default_rng(3)
    fit = binomial_random_intercept(*simulate(rng, k=6, sigma=0.6, beta0=0.1, beta1=-0.5, n=80))
    assert fit.odds_ratio == pytest.approx(math.exp(fit.beta1), rel=1e-12)
    assert fit.or_ci_low == pytest.approx(math.exp(fit.beta1 - 1.959964 * fit.se_beta1), rel=1e-6)
    assert fit.or_ci_high == pytest.approx(math.exp(fit.beta1 + 1.959964 * fit.se_beta1), rel=1e-6)
    assert fit.z == pytest.approx(fit.beta1 / fit.se_beta1)


def test_rejects_malformed_counts():
    with pytest.raises(ValueError):
        binomial_random_intercept(np.array([[1, 2, 3]]), np.array([[5, 5, 5]]))
    with pytest.raises(ValueError):
        binomial_random_intercept(np.array([[6, 2], [1, 1]]), np.array([[5, 5], [5, 5]]))

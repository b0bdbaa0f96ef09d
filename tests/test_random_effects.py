"""The variant-level random-slope model and the CR2 sandwich against independent computations:
scipy's t-test, the REML likelihood integrated by brute force, and CR2 from the full hat matrix."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from orchestrator.analysis.cr2 import cr2
from orchestrator.analysis.random_effects import random_effects, reml_tau2


def test_equal_weights_reduce_to_the_one_sample_t_test():
    d = np.array([0.31, -0.05, 0.22, 0.12, 0.4])
    fit = random_effects(d, np.full(5, 0.01))
    ref = stats.ttest_1samp(d, 0.0)
    assert fit.effect == pytest.approx(d.mean(), rel=1e-12)
    assert fit.df == pytest.approx(4.0, rel=1e-9)
    assert (fit.t, fit.p_value) == (
        pytest.approx(ref.statistic, rel=1e-9),
        pytest.approx(ref.pvalue, rel=1e-9),
    )
    half = stats.t.ppf(0.975, 4) * d.std(ddof=1) / np.sqrt(5)
    assert (fit.ci_low, fit.ci_high) == (
        pytest.approx(d.mean() - half),
        pytest.approx(d.mean() + half),
    )
    # REML with equal variances: tau^2 = (sample variance of d) - v, here positive
    assert fit.tau**2 == pytest.approx(d.var(ddof=1) - 0.01, rel=1e-6)


def _brute_force_reml(d: np.ndarray, v: np.ndarray) -> float:
    """REML straight from its definition: the likelihood with beta integrated out (flat prior),
    by quadrature, maximised over tau^2 on a grid and then refined."""

    def neg_log(tau2):
        like = lambda b: np.prod(stats.norm.pdf(d, b, np.sqrt(v + tau2)))
        return -np.log(
            integrate.quad(like, d.min() - 5, d.max() + 5, epsabs=0, epsrel=1e-12, limit=200)[0]
        )

    grid = np.linspace(0, 4 * np.var(d), 100)
    best = grid[np.argmin([neg_log(t) for t in grid])]
    if best == 0.0:
        return 0.0
    step = grid[1]
    return optimize.minimize_scalar(
        neg_log, bounds=(best - step, best + step), method="bounded", options={"xatol": 1e-9}
    ).x


@pytest.mark.slow
def test_reml_tau2_is_the_maximum_of_the_integrated_likelihood():
    d, v = np.array([0.6, -0.2, 0.1, 0.9, 0.3]), np.array([0.02, 0.3, 0.05, 0.1, 0.01])
    assert reml_tau2(d, v) == pytest.approx(_brute_force_reml(d, v), rel=1e-4)
    assert reml_tau2(d, v) > 0.01  # an interior maximum
    # variants agreeing more closely than their own noise allows: the maximum is at tau^2 = 0
    d0 = np.array([0.10, 0.12, 0.09, 0.11])
    assert _brute_force_reml(d0, np.full(4, 0.05)) == 0.0
    assert reml_tau2(d0, np.full(4, 0.05)) == 0.0


def test_bell_mccaffrey_df_of_a_weighted_mean_is_k_minus_1_only_for_equal_weights():
    def closed_form(
        w,
    ):  # Satterthwaite: tr(AM)^2 / tr(AMAM), residual covariance M = diag(1/w) - 1/sum(w)
        h = w / w.sum()
        am = (h**2 / (1 - h))[:, None] * (np.diag(1 / w) - 1 / w.sum())
        return np.trace(am) ** 2 / np.trace(am @ am)

    dfs = {}
    for name, w in {
        "equal": np.ones(4),
        "one dominant": np.array([100.0, 1, 1, 1]),
        "mixed": np.array([3.0, 0.5, 8.0, 1.0, 2.0]),
    }.items():
        dfs[name] = cr2(w[:, None, None], np.ones((len(w), 1)), np.ones(1))[1]
        assert dfs[name] == pytest.approx(closed_form(w), rel=1e-9)
    assert dfs["equal"] == pytest.approx(3.0) and dfs["one dominant"] < 2.0


def _cr2_direct(x, y, w, mu, cluster, contrast):
    """CR2 and its Bell-McCaffrey df from their definitions, with the full weighted hat matrix:
    V = sum_j (g_j'e)^2, g_j = A_j X_j M c; df = tr(S)^2 / tr(S^2), S = G'(I - H)G."""
    xt, et = np.sqrt(w)[:, None] * x, (y - mu) / np.sqrt(w)
    bread = np.linalg.inv(xt.T @ xt)
    hat = xt @ bread @ xt.T
    g = np.zeros((len(y), len(np.unique(cluster))))
    for j in np.unique(cluster):
        idx = cluster == j
        vals, vecs = np.linalg.eigh(np.eye(idx.sum()) - hat[np.ix_(idx, idx)])
        g[idx, j] = (vecs / np.sqrt(vals)) @ vecs.T @ xt[idx] @ bread @ contrast
    s = g.T @ (np.eye(len(y)) - hat) @ g
    return float(np.sum((g.T @ et) ** 2)), float(np.trace(s) ** 2 / np.trace(s @ s))


@pytest.mark.parametrize("logistic", [False, True])
def test_cr2_from_cluster_totals_equals_the_full_hat_matrix_computation(logistic):
    rng = np.random.default_rng(5)
    sizes = [(7, 4), (3, 9), (5, 5), (8, 2)]  # answers per cluster in control, treatment
    cond = np.concatenate([np.repeat([0.0, 1.0], s) for s in sizes])
    cluster = np.concatenate([np.full(sum(s), g) for g, s in enumerate(sizes)])
    x = np.column_stack([np.ones_like(cond), cond])
    y = (
        rng.binomial(1, 0.4 + 0.2 * cond)
        if logistic
        else rng.normal(cond * 0.5 + cluster * 0.3, 1.0)
    )
    if logistic:  # the pooled logistic fit: each condition's share
        p = np.array([y[cond == c].mean() for c in (0, 1)])[cond.astype(int)]
        w, mu = p * (1 - p), p
    else:
        beta = np.linalg.lstsq(x, y, rcond=None)[0]
        w, mu = np.ones_like(y), x @ beta
    info = np.array(
        [(x[cluster == g] * w[cluster == g, None]).T @ x[cluster == g] for g in range(len(sizes))]
    )
    scores = np.array([x[cluster == g].T @ (y - mu)[cluster == g] for g in range(len(sizes))])
    for contrast in (np.array([0.0, 1.0]), np.array([1.0, 0.5])):
        var, df = cr2(info, scores, contrast)
        direct_var, direct_df = _cr2_direct(x, y, w, mu, cluster, contrast)
        assert (var, df) == (
            pytest.approx(direct_var, rel=1e-9),
            pytest.approx(direct_df, rel=1e-9),
        )
        assert 1.0 < df < len(sizes) - 1 + 1e-9


def test_random_effects_with_unequal_weights_matches_the_full_hat_matrix_cr2():
    """The whole fit, degrees of freedom included, against CR2 from its definition with the
    REML weights: one cluster per variant, the weighted mean the only coefficient. Weights this
    unequal leave fewer than K - 1 degrees of freedom; t(K - 1) would make p too small."""
    d, v = np.array([0.6, -0.2, 0.1, 0.9, 0.3]), np.array([0.02, 0.3, 0.05, 0.1, 0.01])
    fit = random_effects(d, v)
    w = 1 / (v + fit.tau**2)
    beta = (w * d).sum() / w.sum()
    # the score of variant j is w_j (d_j - beta): the form _cr2_direct takes as y - mu
    var, df = _cr2_direct(np.ones((5, 1)), w * (d - beta), w, np.zeros(5), np.arange(5), np.ones(1))
    assert df < 3.0  # K - 1 = 4 would be far off
    assert (fit.effect, fit.se, fit.df) == (
        pytest.approx(beta, rel=1e-9),
        pytest.approx(np.sqrt(var), rel=1e-9),
        pytest.approx(df, rel=1e-9),
    )
    p = 2 * stats.t.sf(abs(beta) / np.sqrt(var), df)
    half = stats.t.ppf(0.975, df) * np.sqrt(var)
    assert (fit.p_value, fit.ci_low, fit.ci_high) == (
        pytest.approx(p, rel=1e-9),
        pytest.approx(beta - half, rel=1e-9),
        pytest.approx(beta + half, rel=1e-9),
    )

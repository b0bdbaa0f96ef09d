"""Logistic mixed model y ~ condition + (1 | variant) for aggregated two-condition counts.

Why: the prompt variants of one bias differ in their baseline rate of bias-consistent answers, so
answers are clustered by variant, and pooling them into one 2x2 table overstates the evidence when
variants differ. A normal random intercept per variant models that. statsmodels has only a Bayesian
(variational / MAP) binomial mixed GLM, so this fits the frequentist one by maximum marginal likelihood.

The random intercept is integrated out per variant with *adaptive* Gauss-Hermite quadrature: nodes
centred on the mode of each variant's integrand and scaled by its curvature (lme4's nAGQ > 1). The
plain sqrt(2)*sigma rule is not enough: with ~200 answers per cell a variant's integrand is far
narrower than sigma, and 20-40 fixed nodes gave errors of 0.1-0.5 in beta0 and sigma (K=8, n=200).
Checked against statsmodels in tests/test_glmm.py.

The 11-bias study no longer uses it: a random intercept alone lets a few variants' effects
stand for all prompts (a third or more of nulls whose effect differs by variant came out
significant), so the study fits a random slope on each variant's log odds ratio instead
(random_effects.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial.hermite import hermgauss
from scipy import optimize, stats
from scipy.special import expit

Z95 = float(stats.norm.ppf(0.975))
LOG_SIGMA_BOUNDS = (-10.0, 3.0)  # sigma in [4.5e-5, 20]; the lower end stands for sigma = 0
_COND = np.array([0.0, 1.0])  # column 0 is control, column 1 treatment
_DETA = np.array([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])  # d (b0 + b1*c) / d (b0, b1, log_sigma)


@dataclass(frozen=True)
class GLMMResult:
    """beta1 is the log odds ratio of treatment vs control within a variant; p_value is the two-sided
    Wald test of beta1 = 0, and the odds-ratio interval the exponentiated 95% Wald interval. sigma is
    the random-intercept SD, 0.0 when the likelihood is highest with no between-variant variation.
    When `degenerate` says why the model is not estimable, every numeric field is NaN."""
    beta0: float
    beta1: float
    se_beta1: float
    z: float
    p_value: float
    odds_ratio: float
    or_ci_low: float
    or_ci_high: float
    sigma: float
    converged: bool
    degenerate: str | None = None


def _degenerate_reason(s: np.ndarray, n: np.ndarray) -> str | None:
    """Inputs whose maximum likelihood is at infinity or not identified, caught before fitting."""
    cond_s, cond_n = s.sum(0), n.sum(0)
    if s.shape[0] < 2:
        return "fewer than 2 variants"
    if (cond_n == 0).any():
        return "a condition has no trials"
    if s.sum() == 0 or s.sum() == n.sum():
        return "no variation in the outcome"
    if ((cond_s == 0) | (cond_s == cond_n)).any():
        return "complete separation"
    return None


def _nll_and_grad(theta: np.ndarray, s: np.ndarray, n: np.ndarray, x: np.ndarray,
                  logw: np.ndarray, modes: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative marginal log-likelihood (binomial coefficients dropped) and its exact gradient.

    The gradient includes how each variant's quadrature centre and scale move with theta (implicit
    differentiation of the mode), so it is the derivative of the very function minimised and line
    searches stay consistent where the integrand is skewed (all-0 or all-full variants with a large
    sigma). `modes` is the Newton start, updated in place so successive calls warm-start."""
    b0, b1, log_sigma = theta
    var = np.exp(2 * log_sigma)
    base = b0 + b1 * _COND
    u = modes.copy()
    for _ in range(100):  # the integrand is log-concave in u, so damped Newton finds its mode
        p = expit(base + u[:, None])
        step = np.clip(((s - n * p).sum(1) - u / var) / ((n * p * (1 - p)).sum(1) + 1 / var), -2, 2)
        u += step
        if np.abs(step).max() < 1e-11:
            break
    modes[:] = u
    p = expit(base + u[:, None])
    info = n * p * (1 - p)
    tau2 = 1 / (info.sum(1) + 1 / var)  # variance of the Laplace approximation at the mode
    du = tau2 * np.array([-info.sum(1), -info[:, 1], 2 * u / var])  # d mode / d theta, (3, K)
    deta = _DETA[:, None, :] + du[:, :, None]  # d (b0 + b1*c + mode) / d theta, (3, K, 2)
    dlogtau = -0.5 * tau2 * ((info * (1 - 2 * p) * deta).sum(2) - np.array([[0.0], [0.0], [2 / var]]))
    tau = np.sqrt(tau2)
    v = u[:, None] + np.sqrt(2) * tau[:, None] * x  # (K, nodes) intercept values
    eta = base[None, :, None] + v[:, None, :]  # (K, 2, nodes)
    h = (s[..., None] * eta - n[..., None] * np.logaddexp(0, eta)).sum(1) - v**2 / (2 * var) + x**2 + logw
    top = h.max(1)
    lse = top + np.log(np.exp(h - top[:, None]).sum(1))  # log-sum-exp over the nodes
    ll = (lse + np.log(tau)).sum() - len(s) * (log_sigma + 0.5 * np.log(np.pi))
    r = np.exp(h - lse[:, None])  # each node's share of its variant's likelihood
    resid = s[..., None] - n[..., None] * expit(eta)
    direct = np.array([resid.sum(1), resid[:, 1], v**2 / var - 1])  # d h / d theta at fixed nodes
    dv = du[:, :, None] + np.sqrt(2) * x * (tau * dlogtau)[:, :, None]  # how the nodes move
    grad = (r * (direct + (resid.sum(1) - v / var) * dv)).sum((1, 2)) + dlogtau.sum(1)
    return -float(ll), -grad


def _inverse_if_pd(m: np.ndarray) -> np.ndarray | None:
    try:
        np.linalg.cholesky(m)
    except np.linalg.LinAlgError:
        return None
    return np.linalg.inv(m)


def binomial_random_intercept(successes: np.ndarray, trials: np.ndarray, nodes: int = 20) -> GLMMResult:
    """Fit logit P(y=1) = beta0 + beta1*condition + u_variant, u ~ N(0, sigma^2), by maximum marginal
    likelihood. `successes` and `trials` are (K, 2) counts: row = prompt variant, column 0 = control,
    column 1 = treatment. Variants with no trials are dropped.

    The covariance of (beta0, beta1) is the inverse of a central-difference Hessian of all three
    parameters; at sigma = 0 (a boundary, where that Hessian is near-singular) or when it is not
    positive definite, the inverse of its (beta0, beta1) block, i.e. with sigma held fixed."""
    s, n = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
    if s.ndim != 2 or s.shape[1] != 2 or s.shape != n.shape:
        raise ValueError(f"successes and trials must both be (K, 2); got {s.shape} and {n.shape}")
    if (s < 0).any() or (s > n).any():
        raise ValueError("counts must satisfy 0 <= successes <= trials")
    s, n = s[n.sum(1) > 0], n[n.sum(1) > 0]
    reason = _degenerate_reason(s, n)
    if reason is not None:
        nan = float("nan")
        return GLMMResult(nan, nan, nan, nan, nan, nan, nan, nan, nan, False, reason)

    x, w = hermgauss(nodes)
    logw, modes = np.log(w), np.zeros(len(s))
    fun = lambda t: _nll_and_grad(t, s, n, x, logw, modes)
    logit = np.log(s.sum(0) / (n - s).sum(0))  # the pooled logistic fit, in closed form
    pooled = np.array([logit[0], logit[1] - logit[0], LOG_SIGMA_BOUNDS[0]])  # the sigma = 0 optimum
    # SLSQP rather than L-BFGS-B: the same optima here, in half the time per fit
    res = optimize.minimize(fun, pooled + [0.0, 0.0, np.log(0.5) - LOG_SIGMA_BOUNDS[0]], jac=True,
                            method="SLSQP", bounds=[(None, None), (None, None), LOG_SIGMA_BOUNDS],
                            options={"ftol": 1e-12, "maxiter": 500})
    # When the maximum is at sigma = 0 the slope in sigma vanishes there, so an optimiser only crawls
    # towards it and stops at an arbitrary tiny sigma: take sigma = 0 whenever it is as likely.
    at_zero = bool(fun(pooled)[0] <= res.fun + 1e-6)
    theta = pooled if at_zero else res.x
    at_zero = at_zero or theta[2] <= LOG_SIGMA_BOUNDS[0] + 1e-6
    step = 1e-4
    hess = np.array([(fun(theta + e)[1] - fun(theta - e)[1]) / (2 * step) for e in np.eye(3) * step])
    hess = (hess + hess.T) / 2
    cov = None if at_zero else _inverse_if_pd(hess)
    cov = cov[:2, :2] if cov is not None else _inverse_if_pd(hess[:2, :2])
    se = float(np.sqrt(cov[1, 1])) if cov is not None else float("nan")
    b1 = float(theta[1])
    z = b1 / se
    # sigma on its upper bound means the likelihood still rises with sigma: not a proper maximum
    converged = bool((at_zero or (res.success and theta[2] < LOG_SIGMA_BOUNDS[1] - 1e-6)) and se > 0)
    return GLMMResult(float(theta[0]), b1, se, z, float(2 * stats.norm.sf(abs(z))), float(np.exp(b1)),
                      float(np.exp(b1 - Z95 * se)), float(np.exp(b1 + Z95 * se)),
                      0.0 if at_zero else float(np.exp(theta[2])), converged, None)

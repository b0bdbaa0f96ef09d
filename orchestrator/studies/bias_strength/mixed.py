"""The trial-level models of the Bias Strength Index per bias x model x strategy: does the effect
generalise across the prompt variants? A random slope for condition by variant
(analysis/random_effects.py) on each variant's normalised shift (numbers) or log odds ratio
(choices), each with a pooled robust check: one model over all answers with variant-clustered
CR2 errors and Bell-McCaffrey degrees of freedom (analysis/cr2.py).

Why not statsmodels' MixedLM on the normalised answers: it assumes one residual variance for every
variant, and after normalising by |anchor - mean_C| the variants differ tenfold in noise; on
simulated anchoring data it called under 3% of heterogeneous nulls significant but found a planted
shift of 0.1 in only 33% of runs where the variant-level model found it in 68% (K = 5). A random
intercept has nothing to estimate there either: the normalisation sets every variant's control
mean to exactly 0.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

from orchestrator.analysis.cr2 import cr2
from orchestrator.analysis.random_effects import RandomEffectsResult, random_effects

_FIELDS = (
    "mixed_effect",
    "mixed_p",
    "mixed_df",
    "mixed_tau",
    "odds_ratio",
    "or_ci_low",
    "or_ci_high",
    "robust_effect",
    "robust_p",
)
_SAME = 1e-12  # effects closer than this are one effect (rounding of k/n or of a normalisation)


def _out(fit: RandomEffectsResult | str, robust: tuple[float, float] | None, odds: bool) -> dict:
    out: dict = dict.fromkeys(_FIELDS, float("nan")) | {"identical_effect": False}
    if isinstance(fit, str):
        out["reason"] = fit
    else:
        out |= {
            "mixed_effect": fit.effect,
            "mixed_p": fit.p_value,
            "mixed_df": fit.df,
            "mixed_tau": fit.tau,
        }
        if odds:
            out |= {
                "odds_ratio": float(np.exp(fit.effect)),
                "or_ci_low": float(np.exp(fit.ci_low)),
                "or_ci_high": float(np.exp(fit.ci_high)),
            }
    if robust is not None:
        out["robust_effect"], out["robust_p"] = robust
    return out


def _identical(effect: float, k: int, odds: bool) -> dict:
    """Every variant shows the same effect (a model at T=0 answering 100% -> 0% everywhere, or
    echoing every anchor): nothing varies to test generalisation against, and a p-value from the
    spread that rounding leaves would be invented. Said as what it is: consistent, untestable."""
    if abs(effect) <= _SAME:
        reason = f"no effect in any of the {k} variants (identical in all): no test of generalisation is possible"
    else:
        side = "in the predicted direction" if effect > 0 else "against the prediction"
        reason = (
            f"identical effect in all {k} variants: no test of generalisation is possible; "
            f"consistent in sign (all {side})"
        )
    return _out(reason, None, odds) | {
        "mixed_tau": 0.0,
        "identical_effect": True,
    }  # the variants agree exactly


def _pooled_check(
    n: np.ndarray, resid_sums: np.ndarray, weights: np.ndarray, beta1: float
) -> tuple[float, float]:
    """Test of the condition coefficient of a pooled two-cell model (intercept + condition): CR2
    over variants with Bell-McCaffrey degrees of freedom. n, resid_sums (sum of y - fitted) and
    the working weight per answer are (K, 2), the control in column 0."""
    info = np.zeros((len(n), 2, 2))
    wn = weights * n
    info[:, 0, 0], info[:, 0, 1], info[:, 1, 0], info[:, 1, 1] = (
        wn.sum(1),
        wn[:, 1],
        wn[:, 1],
        wn[:, 1],
    )
    scores = np.column_stack([resid_sums.sum(1), resid_sums[:, 1]])
    var, df = cr2(info, scores, np.array([0.0, 1.0]))
    if not var > 0:  # every variant exactly at the pooled fit
        return beta1, float("nan")
    return beta1, float(2 * stats.t.sf(abs(beta1) / np.sqrt(var), df))


def numeric_models(part: pl.DataFrame) -> dict:
    """Per variant the normalised shift d = (mean_T - mean_C) / (anchor - mean_C), the signed BSI,
    with its delta-method variance; the model's effect is the pooled signed BSI. Robust check:
    OLS of y = (x - mean_C) / (anchor - mean_C) on condition over all answers."""
    d, v, n, sums = [], [], [], []
    for r in part.iter_rows(named=True):
        c, t = np.asarray(r["values_C"] or []), np.asarray(r["values_T"] or [])
        if len(c) < 2 or len(t) < 2 or r["anchor"] is None or r["anchor"] == c.mean():
            continue
        scale = r["anchor"] - c.mean()
        shift = (t.mean() - c.mean()) / scale
        d.append(shift)
        v.append((t.var(ddof=1) / len(t) + (1 - shift) ** 2 * c.var(ddof=1) / len(c)) / scale**2)
        n.append((len(c), len(t)))
        sums.append(shift * len(t))  # sum of y_T; the y_C of a variant sum to 0 by construction
    if len(d) < 2:
        return _out("fewer than 2 variants with answers in both conditions", None, odds=False)
    if np.ptp(d) <= _SAME:
        return _identical(float(np.mean(d)), len(d), odds=False)
    n, sums = np.array(n, float), np.array(sums)
    beta1 = float(
        sums.sum() / n[:, 1].sum()
    )  # pooled: the control mean is 0, the slope the mean y_T
    resid = np.column_stack([np.zeros(len(n)), sums - beta1 * n[:, 1]])
    return _out(
        random_effects(np.array(d), np.array(v)),
        _pooled_check(n, resid, np.ones_like(n), beta1),
        odds=False,
    )


def choice_models(part: pl.DataFrame) -> dict:
    """Per variant the log odds ratio of the predicted role, treatment vs control, with 0.5 added
    to every cell (Haldane-Anscombe: finite when a cell is 0 or full, as deterministic answers make
    it); the model's odds ratio is the typical variant's. Robust check: pooled logistic regression
    on condition, whose fit is closed-form (each condition's pooled share)."""
    k = np.column_stack(
        [part["k_C"].fill_null(0).to_numpy(), part["k_T"].fill_null(0).to_numpy()]
    ).astype(float)
    n = np.column_stack(
        [part["n_C"].fill_null(0).to_numpy(), part["n_T"].fill_null(0).to_numpy()]
    ).astype(float)
    keep = (n > 0).all(axis=1)
    k, n = k[keep], n[keep]
    if len(k) < 2:
        return _out("fewer than 2 variants with answers in both conditions", None, odds=True)
    odds = (k + 0.5) / (n - k + 0.5)
    d, v = np.log(odds[:, 1] / odds[:, 0]), (1 / (k + 0.5) + 1 / (n - k + 0.5)).sum(1)
    # the same shares everywhere (all 0 or all 1 among them): log odds ratios that differ, if at
    # all, by the 0.5 added to cells of different sizes
    shares = k / n
    if (np.ptp(shares, axis=0) <= _SAME).all():
        return _identical(float(shares[0, 1] - shares[0, 0]), len(k), odds=True)
    if np.ptp(d) <= _SAME:
        return _identical(float(d[0]), len(k), odds=True)
    pooled = k.sum(0) / n.sum(0)
    robust = None
    if ((pooled > 0) & (pooled < 1)).all():
        logit = np.log(pooled / (1 - pooled))
        robust = _pooled_check(
            n,
            k - n * pooled,
            np.tile(pooled * (1 - pooled), (len(n), 1)),
            float(logit[1] - logit[0]),
        )
    return _out(random_effects(d, v), robust, odds=True)

"""The trial-level models of the Bias Strength Index per bias x model x strategy: a linear mixed
model on normalised numeric answers, a binomial GLMM on predicted-role counts, each with a
pooled cross-check with variant-clustered errors."""
from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import statsmodels.api as sm

from orchestrator.analysis.glmm import binomial_random_intercept


def numeric_models(part: pl.DataFrame) -> dict[str, float]:
    """Linear mixed model on values normalised per variant, y = (x - mean_C) / (anchor - mean_C),
    so the condition coefficient is a pooled signed BSI; random intercept per variant. Cross-check:
    OLS with variant-clustered standard errors."""
    ys, conds, groups = [], [], []
    for g, r in enumerate(part.iter_rows(named=True)):
        if not r["values_C"] or not r["values_T"] or r["anchor"] is None:
            continue
        base, scale = np.mean(r["values_C"]), r["anchor"] - np.mean(r["values_C"])
        if scale == 0:
            continue
        for c, values in ((0, r["values_C"]), (1, r["values_T"])):
            ys.append((np.asarray(values) - base) / scale)
            conds.append(np.full(len(values), c))
            groups.append(np.full(len(values), g))
    if len(ys) < 4:
        return {"reason": "too few variants with answers"}
    y, x, grp = np.concatenate(ys), sm.add_constant(np.concatenate(conds).astype(float)), np.concatenate(groups)
    out: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit = sm.MixedLM(y, x, groups=grp).fit(reml=True)
            out |= {"mixed_effect": float(fit.fe_params[1]), "mixed_p": float(fit.pvalues[1])}
        except (np.linalg.LinAlgError, ValueError) as exc:
            out["reason"] = f"mixed model failed: {exc}"
        robust = sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": grp})
    return out | {"robust_effect": float(robust.params[1]), "robust_p": float(robust.pvalues[1])}


def choice_models(part: pl.DataFrame) -> dict[str, float]:
    """Binomial GLMM (logit, random intercept per variant) on predicted-role counts, odds ratio of
    treatment vs control. Cross-check: pooled logistic GLM with variant-clustered errors."""
    succ = np.column_stack([part["k_C"].fill_null(0).to_numpy(), part["k_T"].fill_null(0).to_numpy()])
    trials = np.column_stack([part["n_C"].fill_null(0).to_numpy(), part["n_T"].fill_null(0).to_numpy()])
    keep = (trials > 0).all(axis=1)
    succ, trials = succ[keep], trials[keep]
    fit = binomial_random_intercept(succ, trials)
    if not fit.degenerate and not fit.converged:  # e.g. every variant answers alike: no real maximum
        return {"reason": "mixed model did not converge (no proper maximum)"}
    out: dict[str, float] = {"reason": fit.degenerate} if fit.degenerate else {
        "mixed_effect": fit.beta1, "mixed_p": fit.p_value, "odds_ratio": fit.odds_ratio,
        "or_ci_low": fit.or_ci_low, "or_ci_high": fit.or_ci_high}
    if fit.degenerate or len(succ) < 2:
        return out
    endog = np.column_stack([succ.ravel(), (trials - succ).ravel()])
    exog = sm.add_constant(np.tile([0.0, 1.0], len(succ)))
    groups = np.repeat(np.arange(len(succ)), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robust = sm.GLM(endog, exog, family=sm.families.Binomial()).fit(
            cov_type="cluster", cov_kwds={"groups": groups})
    return out | {"robust_effect": float(robust.params[1]), "robust_p": float(robust.pvalues[1])}

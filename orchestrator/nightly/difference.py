"""The statistics of a run-to-run comparison: how much each effect moved, with a 95% CI and a
p-value for the change, and whether parse errors and refusals became more or less common.

The two nights are independent samples of the same design, so an effect's change is tested as
the difference of two independent estimates: d = b - a, SE(d) = sqrt(se_a^2 + se_b^2), z = d / SE(d)
(normal). A study that gives no standard error has it read off its 95% CI, (high - low) / (2 x 1.96):
for an asymmetric interval (Newcombe, bootstrap) that is an approximation. Rates are compared by
Fisher's exact test, which stays honest at the small counts parse errors and refusals come in.
Every test of one comparison is one family for Benjamini-Hochberg (`q`).
"""
from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

from orchestrator.analysis.effects import KEY
from orchestrator.analysis.stats import Z95, bh

ALPHA = 0.05  # for a change (q) and for an effect being there at all (the study's own p)


def _se() -> pl.Expr:
    from_ci = (pl.col("ci_high") - pl.col("ci_low")) / (2 * Z95)
    return pl.coalesce(pl.col("se"), from_ci)


def _significant(suffix: str) -> pl.Expr:
    """The effect is there in that run: the study's p < ALPHA, else its CI excludes 0."""
    p, low, high = (pl.col(f"{c}_{suffix}") for c in ("p", "ci_low", "ci_high"))
    by_ci = pl.when(low.is_null() | high.is_null()).then(None).otherwise((low > 0) | (high < 0))
    return pl.when(p.is_not_null()).then(p < ALPHA).otherwise(by_ci)


def effect_changes(a: pl.DataFrame, b: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(changes of the effects both runs have, rows only in a, rows only in b). The changes carry
    each run's effect, CI and significance, the difference with its CI, z and p (q is added
    with the family: see adjust)."""
    keep = ["effect", "ci_low", "ci_high", "p", "n"]
    side = {s: df.with_columns(se=_se()).select(*KEY, "model", *keep, "se")
            for s, df in (("a", a), ("b", b))}
    joined = side["a"].join(side["b"], on=KEY, how="inner", suffix="_b", nulls_equal=True)
    joined = joined.rename({c: f"{c}_a" for c in [*keep, "se"]}).rename({"model": "model"})
    d = pl.col("effect_b") - pl.col("effect_a")
    se_d = (pl.col("se_a") ** 2 + pl.col("se_b") ** 2).sqrt()
    z = d / se_d
    changes = (joined.drop("model_b").with_columns(change=d, change_se=se_d)
               .with_columns(change_ci_low=pl.col("change") - Z95 * pl.col("change_se"),
                             change_ci_high=pl.col("change") + Z95 * pl.col("change_se"),
                             # no spread in either run: a change is certain, no change is none
                             z=pl.when(pl.col("change_se") > 0).then(z),
                             significant_a=_significant("a"), significant_b=_significant("b"))
               .with_columns(p_change=pl.when(pl.col("change_se") > 0)
                             .then(pl.col("z").abs().map_batches(
                                 lambda s: pl.Series(2 * stats.norm.sf(s.to_numpy()), dtype=pl.Float64)))
                             .when(pl.col("change") == 0).then(1.0)))
    only_a = side["a"].join(side["b"], on=KEY, how="anti", nulls_equal=True).select(*KEY, "model")
    only_b = side["b"].join(side["a"], on=KEY, how="anti", nulls_equal=True).select(*KEY, "model")
    return changes, only_a, only_b


def _fisher(x_a: int, n_a: int, x_b: int, n_b: int) -> float | None:
    if n_a == 0 or n_b == 0:
        return None
    return float(stats.fisher_exact([[x_a, n_a - x_a], [x_b, n_b - x_b]]).pvalue)


def rate_changes(models_a: pl.DataFrame, models_b: pl.DataFrame, names: dict[str, str]) -> pl.DataFrame:
    """Per model both runs have, for parse errors and for refusals: the count per answered call
    in each run and Fisher's p for the change; with the model's failed lines, latency p50/p95
    and cost per call in each run (shown, not tested: latency moves with load)."""
    joined = models_a.join(models_b, on="modelKey", suffix="_b").rename(
        {c: f"{c}_a" for c in models_a.columns if c != "modelKey"})
    rows = []
    for r in joined.iter_rows(named=True):
        for what, column in (("parse errors", "parse_errors"), ("refusals", "refusals")):
            x_a, x_b, n_a, n_b = r[f"{column}_a"], r[f"{column}_b"], r["answered_a"], r["answered_b"]
            rows.append({"modelKey": r["modelKey"], "model": names.get(r["modelKey"], r["modelKey"]),
                         "rate": what, "count_a": x_a, "of_a": n_a, "count_b": x_b, "of_b": n_b,
                         "share_a": x_a / n_a if n_a else None, "share_b": x_b / n_b if n_b else None,
                         "p_change": _fisher(x_a, n_a, x_b, n_b)})
    rates = pl.DataFrame(rows, schema={"modelKey": pl.String, "model": pl.String, "rate": pl.String,
                                       "count_a": pl.Int64, "of_a": pl.Int64, "count_b": pl.Int64,
                                       "of_b": pl.Int64, "share_a": pl.Float64, "share_b": pl.Float64,
                                       "p_change": pl.Float64})
    shown = [c for c in joined.columns if c.startswith(("failed_lines", "latency", "cost_per_call"))]
    return rates.join(joined.select("modelKey", *shown), on="modelKey", how="left")


def adjust(effects: pl.DataFrame, rates: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Benjamini-Hochberg across every test of the comparison (effect changes and rates)."""
    p = np.concatenate([effects["p_change"].fill_null(np.nan).to_numpy(),
                        rates["p_change"].fill_null(np.nan).to_numpy()]).astype(float)
    q = bh(p)
    return (effects.with_columns(pl.Series("q", q[:effects.height]).fill_nan(None)),
            rates.with_columns(pl.Series("q", q[effects.height:]).fill_nan(None)))

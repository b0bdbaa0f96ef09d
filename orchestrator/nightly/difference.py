"""The statistics of a run-to-run comparison: how much each effect moved, with a 95% CI and a
p-value for the change, and whether parse errors and refusals became more or less common.

The two nights are independent samples of the same design, so an effect's change is tested as
the difference of two independent estimates: d = b - a, SE(d) = sqrt(se_a^2 + se_b^2). Where both
effects come with t-based intervals (their degrees of freedom known), d / SE(d) is referred to
Student's t with Welch-Satterthwaite degrees of freedom; otherwise to the normal. A study that
gives no standard error has it read off its 95% CI, (high - low) / (2 x the interval's quantile):
for an asymmetric interval (Newcombe, bootstrap) that is an approximation. With few degrees of
freedom (a BSI over four prompt variants) the normal would call chance changes significant
several times too often. Rates are compared by
Fisher's exact test, which stays honest at the small counts parse errors and refusals come in.
Every test of one comparison is one family for Benjamini-Hochberg (`q`).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import special

from orchestrator.analysis.effects import KEY
from orchestrator.analysis.stats import Z95, bh

ALPHA = 0.05  # for a change (q) and for an effect being there at all (the study's own p)


def _quantile(df: np.ndarray) -> np.ndarray:
    """The 97.5% quantile of t(df), the normal's where df is unknown (NaN)."""
    return np.where(np.isnan(df), Z95, special.stdtrit(np.where(np.isnan(df), 1.0, df), 0.975))


def _with_se(frame: pl.DataFrame) -> pl.DataFrame:
    """The standard error: the study's, else read off its CI; a sampling model's effect with
    no CI at all had no spread in its answers (every rating alike): 0, so its change is tested
    against the other night's spread, not left untested. A deterministic model's stays unknown."""
    df = frame["df"].fill_null(np.nan).to_numpy().astype(float)
    width = (frame["ci_high"] - frame["ci_low"]).fill_null(np.nan).to_numpy().astype(float)
    from_ci = pl.Series(width / (2 * _quantile(df))).fill_nan(None)
    no_spread = pl.when(
        ~pl.col("deterministic") & (pl.col("n") >= 4) & pl.col("effect").is_not_null()
    ).then(0.0)
    return frame.with_columns(se=pl.coalesce(pl.col("se"), from_ci, no_spread))


def _p_change(changes: pl.DataFrame) -> pl.DataFrame:
    """Two-sided p and the 95% CI of each change: t on Welch-Satterthwaite df where both sides
    have df, else normal. No spread in either run: no change is p = 1, a change untestable."""
    se_a, se_b = (changes[c].fill_null(np.nan).to_numpy().astype(float) for c in ("se_a", "se_b"))
    df_a, df_b = (changes[c].fill_null(np.nan).to_numpy().astype(float) for c in ("df_a", "df_b"))
    a, b = (changes[c].fill_null(np.nan).to_numpy().astype(float) for c in ("effect_a", "effect_b"))
    d = b - a
    d = np.where(
        np.abs(d) <= 1e-12 * np.fmax(1.0, np.fmax(np.abs(a), np.abs(b))), 0.0, d
    )  # rounding
    se = np.sqrt(se_a**2 + se_b**2)
    df_a, df_b = (np.where(d > 0, d, np.nan) for d in (df_a, df_b))  # no df: the normal
    with np.errstate(divide="ignore", invalid="ignore"):
        # Welch-Satterthwaite; a side with no spread adds nothing (its df do not matter)
        df = (se_a**2 + se_b**2) ** 2 / (
            np.where(se_a > 0, se_a**4 / df_a, 0.0) + np.where(se_b > 0, se_b**4 / df_b, 0.0)
        )
        z = np.where(se > 0, d / se, np.nan)
    p = np.where(
        np.isnan(df),
        2 * special.ndtr(-np.abs(z)),
        2 * special.stdtr(np.where(np.isnan(df), 1, df), -np.abs(z)),
    )
    p = np.where(se > 0, p, np.where(d == 0, 1.0, np.nan))
    half = _quantile(df) * se
    return changes.with_columns(
        *(
            pl.Series(name, values).fill_nan(None)
            for name, values in (
                ("change", d),
                ("change_se", se),
                ("change_df", df),
                ("change_ci_low", d - half),
                ("change_ci_high", d + half),
                ("z", z),
                ("p_change", p),
            )
        )
    )


def _significant(suffix: str) -> pl.Expr:
    """The effect is there in that run: the study's p < ALPHA, else its CI excludes 0."""
    p, low, high = (pl.col(f"{c}_{suffix}") for c in ("p", "ci_low", "ci_high"))
    by_ci = pl.when(low.is_null() | high.is_null()).then(None).otherwise((low > 0) | (high < 0))
    return pl.when(p.is_not_null()).then(p < ALPHA).otherwise(by_ci)


def effect_changes(
    a: pl.DataFrame, b: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(changes of the effects both runs have, rows only in a, rows only in b). The changes carry
    each run's effect, CI and significance, the difference with its CI, z and p (q is added
    with the family: see adjust)."""
    keep = ["effect", "ci_low", "ci_high", "p", "n", "df"]
    a, b = (
        f if "deterministic" in f.columns else f.with_columns(deterministic=pl.lit(False))
        for f in (a, b)
    )
    side = {s: _with_se(df).select(*KEY, "model", *keep, "se") for s, df in (("a", a), ("b", b))}
    joined = (
        side["a"]
        .join(side["b"], on=KEY, how="inner", suffix="_b", nulls_equal=True)
        .rename({c: f"{c}_a" for c in [*keep, "se"]})
        .drop("model_b")
    )
    changes = _p_change(
        joined.with_columns(change=pl.col("effect_b") - pl.col("effect_a"))
    ).with_columns(significant_a=_significant("a"), significant_b=_significant("b"))
    only_a = side["a"].join(side["b"], on=KEY, how="anti", nulls_equal=True).select(*KEY, "model")
    only_b = side["b"].join(side["a"], on=KEY, how="anti", nulls_equal=True).select(*KEY, "model")
    return changes, only_a, only_b


def _fisher(x_a: int, n_a: int, x_b: int, n_b: int) -> float | None:
    if n_a == 0 or n_b == 0:
        return None
    from scipy import stats  # here: its import costs 0.6 s, and few effects need it

    return float(stats.fisher_exact([[x_a, n_a - x_a], [x_b, n_b - x_b]]).pvalue)


def rate_changes(
    models_a: pl.DataFrame, models_b: pl.DataFrame, names: dict[str, str]
) -> pl.DataFrame:
    """Per model both runs have, for parse errors and for refusals: the count per answered call
    in each run and Fisher's p for the change; with the model's failed lines, latency p50/p95
    and cost per call in each run (shown, not tested: latency moves with load)."""
    joined = models_a.join(models_b, on="modelKey", suffix="_b").rename(
        {c: f"{c}_a" for c in models_a.columns if c != "modelKey"}
    )
    rows = []
    for r in joined.iter_rows(named=True):
        for what, column in (("parse errors", "parse_errors"), ("refusals", "refusals")):
            x_a, x_b, n_a, n_b = (
                r[f"{column}_a"],
                r[f"{column}_b"],
                r["answered_a"],
                r["answered_b"],
            )
            rows.append(
                {
                    "modelKey": r["modelKey"],
                    "model": names.get(r["modelKey"], r["modelKey"]),
                    "rate": what,
                    "count_a": x_a,
                    "of_a": n_a,
                    "count_b": x_b,
                    "of_b": n_b,
                    "share_a": x_a / n_a if n_a else None,
                    "share_b": x_b / n_b if n_b else None,
                    "p_change": _fisher(x_a, n_a, x_b, n_b),
                }
            )
    rates = pl.DataFrame(
        rows,
        schema={
            "modelKey": pl.String,
            "model": pl.String,
            "rate": pl.String,
            "count_a": pl.Int64,
            "of_a": pl.Int64,
            "count_b": pl.Int64,
            "of_b": pl.Int64,
            "share_a": pl.Float64,
            "share_b": pl.Float64,
            "p_change": pl.Float64,
        },
    )
    shown = [
        c for c in joined.columns if c.startswith(("failed_lines", "latency", "cost_per_call"))
    ]
    return rates.join(joined.select("modelKey", *shown), on="modelKey", how="left")


def adjust(effects: pl.DataFrame, rates: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Benjamini-Hochberg across every test of the comparison (effect changes and rates)."""
    p = np.concatenate(
        [
            effects["p_change"].fill_null(np.nan).to_numpy(),
            rates["p_change"].fill_null(np.nan).to_numpy(),
        ]
    ).astype(float)
    q = bh(p)
    return (
        effects.with_columns(pl.Series("q", q[: effects.height]).fill_nan(None)),
        rates.with_columns(pl.Series("q", q[effects.height :]).fill_nan(None)),
    )

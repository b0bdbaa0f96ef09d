"""Every study's headline effects in one shape, for what reads many runs (compare, trend).

One row per study x measure x experiment x strategy x model: the estimate, its 95% CI, its
standard error where the study has one (else compare derives it from the CI), the degrees of
freedom of a t-based interval (null: a normal one), the study's own p-value for it, and the
answers behind it. Where answers are numbers, also what a few extreme ones would hide
(analysis/robust.py): a robust estimate with its CI, whether a few answers dominate the effect,
and how many answers lie outside the job's plausible range (null where a study has none).
"""

from __future__ import annotations

import polars as pl

EFFECT_SCHEMA = {
    "study": pl.String,
    "measure": pl.String,
    "experiment": pl.String,
    "strategy": pl.String,
    "modelKey": pl.String,
    "model": pl.String,
    "effect": pl.Float64,
    "se": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p": pl.Float64,
    "n": pl.Int64,
    "df": pl.Float64,
    "robust": pl.Float64,
    "robust_low": pl.Float64,
    "robust_high": pl.Float64,
    "dominated": pl.Boolean,
    "implausible": pl.Int64,
}
KEY = ["study", "measure", "experiment", "strategy", "modelKey"]


def _expr(value: str | pl.Expr | None) -> pl.Expr:
    if value is None:
        return pl.lit(None)
    return pl.col(value) if isinstance(value, str) else value


def effect_rows(
    frame: pl.DataFrame,
    study: str,
    measure: str | pl.Expr,
    experiment: str | pl.Expr,
    effect: str,
    ci_low: str,
    ci_high: str,
    *,
    strategy: str | pl.Expr | None = "strategy",
    p: str | pl.Expr | None = None,
    n: str | pl.Expr | None = None,
    se: str | pl.Expr | None = None,
    df: str | pl.Expr | None = None,
    robust: tuple[str | pl.Expr | None, str | pl.Expr | None, str | pl.Expr | None] | None = None,
    dominated: str | pl.Expr | None = None,
    implausible: str | pl.Expr | None = None,
) -> pl.DataFrame:
    """A study table's effects in EFFECT_SCHEMA: each argument names a column (or is an
    expression); measure and experiment given as plain text that is not a column are literals.
    robust: the (estimate, ci_low, ci_high) columns of a robust estimate, where there is one."""

    def text(value: str | pl.Expr) -> pl.Expr:
        return (
            pl.lit(value) if isinstance(value, str) and value not in frame.columns else _expr(value)
        )

    exprs = {
        "study": pl.lit(study),
        "measure": text(measure),
        "experiment": text(experiment),
        "strategy": _expr(strategy)
        if strategy is None or not isinstance(strategy, str) or strategy in frame.columns
        else pl.lit(strategy),
        "modelKey": pl.col("modelKey"),
        "model": pl.col("model"),
        "effect": pl.col(effect),
        "se": _expr(se),
        "ci_low": pl.col(ci_low),
        "ci_high": pl.col(ci_high),
        "p": _expr(p),
        "n": _expr(n),
        "df": _expr(df),
        **{
            name: _expr(column)
            for name, column in zip(
                ("robust", "robust_low", "robust_high"), robust or (None,) * 3, strict=True
            )
        },
        "dominated": _expr(dominated),
        "implausible": _expr(implausible),
    }
    return frame.select(expr.cast(EFFECT_SCHEMA[name]).alias(name) for name, expr in exprs.items())


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=EFFECT_SCHEMA)

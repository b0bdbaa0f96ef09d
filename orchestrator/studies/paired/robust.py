"""Beside the spec's mean difference, for experiments answered with numbers: what a few extreme
answers would hide (analysis/robust.py has the statistics).

- hl_effect [hl_ci_low, hl_ci_high], hl_p: the Hodges-Lehmann shift in the spec's direction
  (the median of the pairwise differences), the Brunner-Munzel p and the shifts that test does
  not reject as its interval, which need no pure shift (none at T=0, as for Welch, nor below 6
  answers a condition);
- effect_without_extremes and dominated: the mean difference without the two answers farthest
  from their condition's median, and whether leaving them out moves it by more than the full
  width of its CI without them and by a quarter of its size or of the answers' SD
  (leave_two_out has the rule and its calibration);
- n_implausible_0/1 and n_implausible: valid answers outside the experiment's plausibleRange,
  where the job declares one (null where it does not). They stay in the mean.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.robust import hodges_lehmann, leave_two_out
from orchestrator.report.format import fmt

# computed here, per row, from the answers themselves
ADDED = {
    "hl_effect": pl.Float64,
    "hl_ci_low": pl.Float64,
    "hl_ci_high": pl.Float64,
    "hl_p": pl.Float64,
    "effect_without_extremes": pl.Float64,
    "dominated": pl.Boolean,
}
COLUMNS = [
    *ADDED,
    "plausible_low",
    "plausible_high",
    "n_implausible_0",
    "n_implausible_1",
    "n_implausible",
]


def implausible(ok: pl.Expr) -> pl.Expr:
    """Per cell: valid answers outside [plausible_low, plausible_high] (0 without a range: the
    table nulls it then, see `with_robust`)."""
    value = pl.col("value")
    return (
        ((value < pl.col("plausible_low")) | (value > pl.col("plausible_high")))
        .fill_null(False)
        .filter(ok)
        .sum()
    )


def answers(answered: pl.LazyFrame, metrics: pl.DataFrame, keys: list[str]) -> pl.LazyFrame:
    """The valid answers (`values`) per `keys` of the mean-difference experiments: a choice
    has no value."""
    numeric = metrics.filter(pl.col("metric_type") == "mean-difference")
    return (
        answered.join(numeric.lazy().select("job", "experimentSlug"), on=["job", "experimentSlug"])
        .filter(pl.col("status") == "ok", pl.col("value").is_not_null())
        .group_by(keys)
        .agg(values=pl.col("value"))
    )


def cell_values(cond: pl.DataFrame, keys: list[str]) -> dict[tuple, dict[int, np.ndarray]]:
    """The valid answers per row and condition (per_condition's `values`), for the
    mean-difference experiments only: a choice has no value."""
    out: dict[tuple, dict[int, np.ndarray]] = {}
    cells = cond.select(*keys, "conditionIndex")
    for row, values in zip(cells.iter_rows(named=True), cond["values"]):  # as arrays, unboxed
        if len(values):
            key = tuple(row[k] for k in keys)
            out.setdefault(key, {})[row["conditionIndex"]] = values.to_numpy().astype(float)
    return out


def with_robust(
    df: pl.DataFrame, values: dict[tuple, dict[int, np.ndarray]], keys: list[str]
) -> pl.DataFrame:
    """The effects table (one row per `keys`) with COLUMNS added; `values` from cell_values."""
    rows = []
    empty = np.array([], float)
    for r in df.select(*keys, "metric_type", "direction", "deterministic").iter_rows(named=True):
        row = dict.fromkeys(ADDED)
        cells = values.get(tuple(r[k] for k in keys))
        if r["metric_type"] == "mean-difference" and cells:
            a, b = cells.get(0, empty), cells.get(1, empty)
            if r["direction"] == "condition1-minus-condition0":
                a, b = b, a
            shift = hodges_lehmann(a, b)
            row["hl_effect"] = shift.estimate
            # one draw repeated (T=0): an interval or a test would count it n times
            if not r["deterministic"]:
                influence = leave_two_out(a, b)
                row["hl_ci_low"], row["hl_ci_high"] = shift.low, shift.high
                row["hl_p"] = shift.p
                row["effect_without_extremes"] = influence.without
                row["dominated"] = influence.dominated
        rows.append(row)
    added = pl.DataFrame(rows, schema=ADDED).with_columns(pl.col(pl.Float64).fill_nan(None))
    ranged = pl.col("plausible_low").is_not_null()
    return pl.concat([df, added], how="horizontal").with_columns(
        pl.when(ranged).then(pl.col("n_implausible_0")).alias("n_implausible_0"),
        pl.when(ranged).then(pl.col("n_implausible_1")).alias("n_implausible_1"),
        pl.when(ranged)
        .then(pl.col("n_implausible_0") + pl.col("n_implausible_1"))
        .alias("n_implausible"),
    )


def _num(column: str) -> pl.Expr:
    """As the tables show numbers (report/format.fmt): 286, 1,500, 1.500e+22."""
    return pl.col(column).map_elements(fmt, return_dtype=pl.String, skip_nulls=True)


def robust_flags() -> list[pl.Expr]:
    """The flags that say a few answers carry the mean, or that answers are implausible."""
    return [
        pl.when(pl.col("dominated")).then(
            pl.format(
                "a few answers dominate the mean: without the 2 farthest from their condition's "
                "median the effect is {}, a move wider than the mean's CI without them; the "
                "robust (Hodges-Lehmann) shift is {} [{}, {}]",
                _num("effect_without_extremes"),
                _num("hl_effect"),
                _num("hl_ci_low").fill_null("-"),
                _num("hl_ci_high").fill_null("-"),
            )
        ),
        pl.when(pl.col("n_implausible") > 0).then(
            pl.format(
                "{} answer(s) outside the plausible range [{}, {}] (c0 {}, c1 {}), "
                "kept in the mean",
                pl.col("n_implausible"),
                _num("plausible_low"),
                _num("plausible_high"),
                pl.col("n_implausible_0"),
                pl.col("n_implausible_1"),
            )
        ),
    ]

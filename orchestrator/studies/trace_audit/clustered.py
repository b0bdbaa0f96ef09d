"""The audit's statistics over items, not traces (issue 45, item 2).

A run's traces are not independent draws: every sample and option order of one source item is
a trace of its own, and at T=0 those traces are one text judged the same way. A test over
traces then takes 50 copies of 10 items for 50 items: simulated with no condition effect (item
effect sd 1, item x condition sd 0.7, a judge on the 1-5 scale), Welch over traces called
13-32% of nulls significant; a paired t over item means stays at 4-5%
(tests/test_trace_audit_clustered.py). So every interval here takes the item as its unit: a
trace of a traces file is its own item; a run's trace belongs to its source item (the run's
variant, or its option-order group), known from `source_item`.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import special

from orchestrator.analysis.cr2 import cr2_cells
from orchestrator.analysis.stats import wilson

ITEM = "item"


def with_items(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with its rows' item (ITEM). A run's item is named within its experiment (one
    variant id may serve several experiments); a trace whose item is unknown (an audit planned
    before items were recorded, its source run gone) stands for itself, as before."""
    return frame.with_columns(
        pl.when(pl.col("source_item").is_not_null())
        .then(pl.concat_str("source_experiment", "source_item", separator="/"))
        .otherwise(pl.coalesce("trace_id", "task_id"))
        .alias(ITEM)
    )


def clustered_wilson(successes, totals) -> tuple[float, float, float]:
    """A Wilson 95% interval for sum(successes) / sum(totals) over clusters, on the effective
    number of units: (low, high, n_eff). n_eff = p(1-p) / V, V the cluster-robust (CR0) variance
    of the ratio, sum_j (y_j - p n_j)^2 / N^2. With one unit per cluster that is N, and plain
    Wilson; where every cluster's units agree it is the number of clusters, the design effect of
    perfectly repeated traces. It is never taken above N (a negative within-item correlation is
    no reason to claim more than the traces), and is the number of clusters where p is 0 or 1
    and V says nothing. Why Wilson on n_eff rather than a t-interval on the ratio: it stays
    inside [0, 1] and keeps its level near 0 and 1, where the audit's rates usually are."""
    y, n = np.asarray(successes, float), np.asarray(totals, float)
    keep = n > 0
    y, n = y[keep], n[keep]
    total = n.sum()
    if total == 0:
        return np.nan, np.nan, 0.0
    p = y.sum() / total
    variance = float(np.sum(np.square(y - p * n)) / total**2)
    clusters = float(len(n))
    n_eff = float(min(total, p * (1 - p) / variance)) if variance > 0 else clusters
    low, high = wilson(p * n_eff, n_eff)
    return float(low), float(high), n_eff


def condition_difference(
    first: dict[str, float], last: dict[str, float], level: float = 0.95
) -> dict[str, float | int | str]:
    """The mean of the items' mean scores in `last` minus that in `first` (item -> mean score
    over its traces): a paired t over the items where every item is in both conditions (the
    usual case: a run's conditions share their variants), else CR2 clustered by item with its
    Bell-McCaffrey df.

    Why not the paired t over the items in both alone: a campaign's `items` sample can draw
    some items in one condition only, and dropping them throws away what they say. Why CR2:
    of the saturated two-mean model with one value per item and condition, it *is* the paired
    t where every item is in both (variance s_d^2 / K, df K - 1; the tests check it against
    scipy's ttest_rel), and it keeps the lone items with their between-item variance counted
    in full (3.6-4.6% false positives at the 5% level in the tests' simulation). NaN where it
    is not estimable (fewer than two items in a condition, or no variance at all)."""
    items = sorted(set(first) | set(last))
    counts = np.array([[i in first, i in last] for i in items], float)
    sums = np.array([[first.get(i, 0.0), last.get(i, 0.0)] for i in items], float)
    paired = int((counts.sum(1) == 2).sum())
    out: dict[str, float | int | str] = {
        "items": len(items),
        "paired_items": paired,
        "method": "paired t" if paired == len(items) else "CR2 by item",
        "difference": np.nan,
        "ci_low": np.nan,
        "ci_high": np.nan,
        "p": np.nan,
        "df": np.nan,
    }
    if not len(first) or not len(last):
        return out
    if paired == len(items):  # the paired t in closed form: CR2's value, without its loop
        d = sums[:, 1] - sums[:, 0]
        estimate = float(d.mean())
        variance = float(d.var(ddof=1) / len(d)) if len(d) > 1 else np.nan
        df = float(len(d) - 1)
    else:
        estimate, variance, df = cr2_cells(counts, sums, np.eye(2), np.array([-1.0, 1.0]))
    out["difference"] = estimate
    if not (variance > 0 and df > 0):  # NaN, or no variance: no interval to give
        return out
    se = float(np.sqrt(variance))
    half = float(special.stdtrit(df, 0.5 + level / 2)) * se
    out |= {
        "ci_low": estimate - half,
        "ci_high": estimate + half,
        "p": float(2 * special.stdtr(df, -abs(estimate) / se)),
        "df": df,
    }
    return out

"""The audit's tables: score distributions per bias, dispositions (escalation and critical-failure
rates with Wilson intervals), agreement with a golden set's labels, and, for traces taken from a
run, the judge's scores by that run's experiment and condition (does the anchoring score drop in
the anchored condition?). Only validated audits give scores; every rate says its denominator.
Intervals and tests take the item, not the trace, as their unit (clustered.py): the samples and
option orders of one prompt are not independent, and at T=0 they are one trace repeated."""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.stats import t_interval
from orchestrator.studies.trace_audit.clustered import (
    ITEM,
    clustered_wilson,
    condition_difference,
    with_items,
)
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

DISPOSITIONS = ("passed", "flagged", "escalated", "not_auditable")
CONDITION_KEYS = (
    "model_key",
    "source_model",
    "source_strategy",
    "source_experiment",
    "bias",
    "context_mode",
)


def scores(frame: pl.DataFrame) -> pl.DataFrame:
    """Per model x bias: validated scores' counts 1..5 and share at 1-2 over the traces; the mean
    of the items' mean scores with a t-interval over items (a traces file's trace is its own
    item, so there it is the mean over traces)."""
    rows = []
    for (key, model, bias), g in with_items(frame).group_by(
        "model_key", "model", "bias", maintain_order=True
    ):
        valid = g.filter(pl.col("judge_score").is_not_null())
        values = valid["judge_score"].to_numpy().astype(float)
        means = (
            valid.group_by(ITEM).agg(pl.col("judge_score").mean())["judge_score"].to_numpy()
            if valid.height
            else np.array([])
        )
        low, high = t_interval(means) if len(means) >= 2 else (np.nan, np.nan)
        rows.append(
            {
                "modelKey": key,
                "model": model,
                "bias": bias,
                "n": len(values),
                "items": len(means),
                **{f"score_{s}": int((values == s).sum()) for s in range(1, 6)},
                "mean": float(means.mean()) if len(means) else None,
                "mean_ci_low": _num(low),
                "mean_ci_high": _num(high),
                "critical_share": float((values <= 2).mean()) if len(values) else None,
            }
        )
    return _ordered(pl.DataFrame(rows), "bias")


def dispositions(frame: pl.DataFrame) -> pl.DataFrame:
    """Per model: traces by disposition; escalation rate among traces sent to the judge, and
    critical-failure rate among validated audits, each with a Wilson 95% interval on the
    effective number of traces given their clustering by item (clustered.clustered_wilson)."""
    per_trace = with_items(frame.unique(["task_id"], keep="first", maintain_order=True))
    judged_now = pl.col("disposition").is_in(["passed", "flagged", "escalated"])
    rows = []
    for (key, model), g in per_trace.group_by("model_key", "model", maintain_order=True):
        counts = {d: int((g["disposition"] == d).sum()) for d in DISPOSITIONS}
        judged = counts["passed"] + counts["flagged"] + counts["escalated"]
        validated = int(g["critical"].is_not_null().sum())  # a validated audit has its flag
        critical = int(g["critical"].fill_null(False).sum())
        per_item = g.group_by(ITEM).agg(
            escalated=(pl.col("disposition") == "escalated").sum(),
            judged=judged_now.sum(),
            critical=pl.col("critical").fill_null(False).sum(),
            validated=pl.col("critical").is_not_null().sum(),
        )
        e_low, e_high, e_n = clustered_wilson(per_item["escalated"], per_item["judged"])
        c_low, c_high, c_n = clustered_wilson(per_item["critical"], per_item["validated"])
        rows.append(
            {
                "modelKey": key,
                "model": model,
                "traces": g.height,
                "items": per_item.height,
                **counts,
                "screened_out": int(
                    ((g["disposition"] == "passed") & g["critical"].is_null()).sum()
                ),
                "escalation_rate": counts["escalated"] / judged if judged else None,
                "escalation_ci_low": _num(e_low),
                "escalation_ci_high": _num(e_high),
                "escalation_n_eff": e_n,
                "validated": validated,
                "critical_rate": critical / validated if validated else None,
                "critical_ci_low": _num(c_low),
                "critical_ci_high": _num(c_high),
                "critical_n_eff": c_n,
            }
        )
    return pl.DataFrame(rows)


def by_condition(frame: pl.DataFrame) -> pl.DataFrame:
    """For traces from a run: per source model x experiment x bias and the context the judge saw
    (own, swapped, none: traces.CONTEXTS), the mean validated score in each condition, and the
    last condition's minus the first's with its 95% CI and p (unadjusted).

    The unit is the item: each item's traces (its samples and option orders) are averaged per
    condition, so the ten identical traces of a T=0 source count once, and the difference is
    tested over items (clustered.condition_difference: the paired t where every item is in both
    conditions). Welch over traces took them for independent draws and called 13-32% of
    simulated nulls significant. `identical_cells` counts the item x condition cells of two or
    more traces whose texts are all one (a deterministic source); `unknown_items`, the traces
    whose item is unknown and that count as items of their own."""
    sourced = frame.filter(
        pl.col("source_experiment").is_not_null() & pl.col("judge_score").is_not_null()
    )
    if "context_mode" not in sourced.columns:
        sourced = sourced.with_columns(context_mode=pl.lit("own"))
    cells = (
        with_items(sourced)
        .group_by(*CONDITION_KEYS, "source_condition", ITEM, maintain_order=True)
        .agg(
            score=pl.col("judge_score").mean(),
            traces=pl.len(),
            label=pl.col("source_condition_label").first(),
            texts=pl.col("trace_digest").n_unique(),
            untexted=pl.col("trace_digest").null_count(),
            unknown=pl.col("source_item").null_count(),
        )
    )
    rows = []
    for key, g in cells.group_by(*CONDITION_KEYS, maintain_order=True):
        conds = sorted(set(g["source_condition"].to_list()))
        labels = dict(zip(g["source_condition"], g["label"], strict=True))
        means = {
            c: dict(zip(part[ITEM], part["score"], strict=True))
            for c in conds
            for part in [g.filter(pl.col("source_condition") == c)]
        }
        traces = {c: int(g.filter(pl.col("source_condition") == c)["traces"].sum()) for c in conds}
        first, last = conds[0], conds[-1]
        test = condition_difference(means[first], means[last]) if len(conds) > 1 else {}
        repeated = g.filter(pl.col("traces") > 1)
        rows.append(
            {
                "modelKey": key[0],
                "source_model": key[1],
                "strategy": key[2],
                "experiment": key[3],
                "bias": key[4],
                "context": key[5] or "own",
                "conditions": " / ".join(
                    f"{labels[c]}: {np.mean(list(means[c].values())):.2f} "
                    f"({len(means[c])} items, {traces[c]} traces)"
                    for c in conds
                ),
                "first": labels[first],
                "last": labels[last],
                "difference": _num(test.get("difference", np.nan)),
                "ci_low": _num(test.get("ci_low", np.nan)),
                "ci_high": _num(test.get("ci_high", np.nan)),
                "p": _num(test.get("p", np.nan)),
                "df": _num(test.get("df", np.nan)),
                "method": test.get("method"),
                "items": int(g[ITEM].n_unique()),
                "paired_items": test.get("paired_items"),
                "traces": int(g["traces"].sum()),
                "repeated_cells": repeated.height,
                "identical_cells": repeated.filter(
                    (pl.col("texts") == 1) & (pl.col("untexted") == 0)
                ).height,
                "unknown_items": int(g["unknown"].sum()),
            }
        )
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def has_references(frame: pl.DataFrame) -> bool:
    return frame["ref_score"].is_not_null().any()


def labelled(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows a golden set's labels apply to: auditable traces that carry them."""
    return frame.filter(
        pl.col("ref_score").is_not_null() & (pl.col("disposition") != "not_auditable")
    )


def agreement(frame: pl.DataFrame) -> pl.DataFrame:
    """Per model: agreement of the judge with the golden set's labels (agreement.py)."""
    from orchestrator.studies.trace_audit.agreement import agreement_table

    parts = [
        agreement_table(g).with_columns(pl.lit(key).alias("modelKey"), pl.lit(model).alias("model"))
        for (key, model), g in labelled(frame).group_by("model_key", "model", maintain_order=True)
    ]
    return pl.concat(parts, how="diagonal") if parts else pl.DataFrame()


def _num(x) -> float | None:
    x = float(np.asarray(x))
    return None if np.isnan(x) else x


def _ordered(df: pl.DataFrame, column: str) -> pl.DataFrame:
    if not df.height:
        return df
    order = {b: i for i, b in enumerate(BIAS_TYPES)}
    return (
        df.with_columns(pl.col(column).replace_strict(order).alias("_o"))
        .sort("modelKey", "_o", maintain_order=True)
        .drop("_o")
    )

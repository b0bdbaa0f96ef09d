"""The audit's tables: score distributions per bias, dispositions (escalation and critical-failure
rates with Wilson intervals), agreement with a golden set's labels, and, for traces taken from a
run, the judge's scores by that run's experiment and condition (does the anchoring score drop in
the anchored condition?). Only validated audits give scores; every rate says its denominator."""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.stats import t_interval, welch, wilson
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

DISPOSITIONS = ("passed", "flagged", "escalated", "not_auditable")


def scores(frame: pl.DataFrame) -> pl.DataFrame:
    """Per model x bias: validated scores' counts 1..5, mean with a t-interval, share at 1-2."""
    rows = []
    for (key, model, bias), g in frame.group_by("model_key", "model", "bias", maintain_order=True):
        values = g["judge_score"].drop_nulls().to_numpy().astype(float)
        low, high = t_interval(values) if len(values) >= 2 else (np.nan, np.nan)
        rows.append(
            {
                "modelKey": key,
                "model": model,
                "bias": bias,
                "n": len(values),
                **{f"score_{s}": int((values == s).sum()) for s in range(1, 6)},
                "mean": float(values.mean()) if len(values) else None,
                "mean_ci_low": _num(low),
                "mean_ci_high": _num(high),
                "critical_share": float((values <= 2).mean()) if len(values) else None,
            }
        )
    return _ordered(pl.DataFrame(rows), "bias")


def dispositions(frame: pl.DataFrame) -> pl.DataFrame:
    """Per model: traces by disposition; escalation rate among traces sent to the judge, and
    critical-failure rate among validated audits, each with a Wilson 95% interval."""
    per_trace = frame.unique(["task_id"], keep="first", maintain_order=True)
    rows = []
    for (key, model), g in per_trace.group_by("model_key", "model", maintain_order=True):
        counts = {d: int((g["disposition"] == d).sum()) for d in DISPOSITIONS}
        judged = counts["passed"] + counts["flagged"] + counts["escalated"]
        validated = int(g["critical"].is_not_null().sum())  # a validated audit has its flag
        critical = int(g["critical"].fill_null(False).sum())
        e_low, e_high = wilson(counts["escalated"], judged)
        c_low, c_high = wilson(critical, validated)
        rows.append(
            {
                "modelKey": key,
                "model": model,
                "traces": g.height,
                **counts,
                "screened_out": int(
                    ((g["disposition"] == "passed") & g["critical"].is_null()).sum()
                ),
                "escalation_rate": counts["escalated"] / judged if judged else None,
                "escalation_ci_low": _num(e_low),
                "escalation_ci_high": _num(e_high),
                "validated": validated,
                "critical_rate": critical / validated if validated else None,
                "critical_ci_low": _num(c_low),
                "critical_ci_high": _num(c_high),
            }
        )
    return pl.DataFrame(rows)


def by_condition(frame: pl.DataFrame) -> pl.DataFrame:
    """For traces from a run: per source model x experiment x bias and the context the judge saw
    (own, swapped, none: traces.CONTEXTS), the mean validated score in each condition, and the
    last condition's minus the first's (Welch 95% CI and p). Traces are the units; several
    samples of one prompt are independent draws of the model, not of items."""
    sourced = frame.filter(
        pl.col("source_experiment").is_not_null() & pl.col("judge_score").is_not_null()
    )
    if "context_mode" not in sourced.columns:
        sourced = sourced.with_columns(context_mode=pl.lit("own"))
    rows = []
    keys = (
        "model_key",
        "source_model",
        "source_strategy",
        "source_experiment",
        "bias",
        "context_mode",
    )
    for key, g in sourced.group_by(*keys, maintain_order=True):
        conds = sorted(set(g["source_condition"].to_list()))
        stats = {}
        for c in conds:
            v = g.filter(pl.col("source_condition") == c)["judge_score"].to_numpy().astype(float)
            stats[c] = (v.mean(), v.var(ddof=1) if len(v) > 1 else np.nan, len(v))
        labels = dict(zip(g["source_condition"], g["source_condition_label"], strict=True))
        first, last = conds[0], conds[-1]
        diff, low, high, p, _ = (
            welch(*stats[last], *stats[first]) if len(conds) > 1 else (np.nan,) * 5
        )
        rows.append(
            {
                "modelKey": key[0],
                "source_model": key[1],
                "strategy": key[2],
                "experiment": key[3],
                "bias": key[4],
                "context": key[5] or "own",
                "conditions": " / ".join(
                    f"{labels[c]}: {stats[c][0]:.2f} (n={stats[c][2]})" for c in conds
                ),
                "first": labels[first],
                "last": labels[last],
                "difference": _num(diff),
                "ci_low": _num(low),
                "ci_high": _num(high),
                "p": _num(p),
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

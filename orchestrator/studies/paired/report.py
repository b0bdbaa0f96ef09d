"""The paired experiments' report section: the effects table, the forest plot, and each
experiment's answer distributions per condition."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from orchestrator.analysis.load import Run, final_records
from orchestrator.report.format import fmt
from orchestrator.studies.base import Figure, ReportPart, Section
from orchestrator.studies.paired import plots
from orchestrator.studies.paired.table import dagger, robust_cell

PAIRED_NOTE = (
    "Positive effects are in the direction the bias predicts. Means: Welch's t-test and its 95% "
    "CI. Shares: Newcombe's 95% interval (hybrid Wilson score) for the difference of proportions, "
    "shown beside the p-value of the pooled two-proportion z-test; they are two methods, so near "
    "0.05 the interval may exclude 0 while p >= 0.05, or the reverse. Every p-value is unadjusted: "
    "each row is tested on its own, with no correction for multiplicity across experiments, "
    "models or strategies. A model at temperature 0 gets no CI or p: its repeated answers are one "
    "draw, not independent samples."
)
ROBUST_NOTE = (
    " Numbers also get a robust shift beside the mean, which stays the spec's measure: the "
    "Hodges-Lehmann estimate (the median of all differences between an answer in one condition "
    "and one in the other, in the spec's direction, an estimate of the median of such "
    "differences) with a 95% CI: the shifts the Brunner-Munzel test does not reject. Neither it "
    "nor that test's p (hl_p) assumes the conditions differ by a pure shift, as the Moses "
    "interval and Mann-Whitney test do: with equal medians and unequal spreads those covered "
    "the true 0 in 83-93% of simulated runs, this interval in 94-95%. It is closed, hence "
    "conservative, where answers tie (on ratings every difference is a whole point, so the "
    "shift and its ends are too, and the interval may be one point); with fewer than 6 answers "
    "in a condition there is no CI or p. † marks a mean that a few "
    "answers dominate: leaving out the two answers farthest from their condition's median moves "
    "it by more than the full width of its 95% CI without them and by more than a quarter of "
    "the larger of its size without them and the other answers' SD (flagged, with the effect "
    "without them; in simulations it fires on none of 3,000 normal samples, on 2% of lognormal "
    "ones with sigma 1 at 20 answers a condition, and on every sample with one answer of 1.5e22 "
    "or of 1000 times the median). Answers outside an experiment's plausibleRange, where the job declares one, are "
    "counted and kept in the mean."
)


def paired_note(summary: pl.DataFrame) -> str:
    """The method note, with what the unadjusted p-values of this table imply together."""
    n = summary["p_value"].drop_nulls().len() if summary.height else 0
    numbers = summary.height and (summary["metric_type"] == "mean-difference").any()
    note = PAIRED_NOTE + (ROBUST_NOTE if numbers else "")
    if n < 2:
        return note
    return (
        f"{note} With {n} p-values here and no effect anywhere, at least one would be "
        f"below 0.05 with probability 1 - 0.95^{n} = {1 - 0.95**n:.0%}."
    )


def _effect_rows(summary: pl.DataFrame) -> list[dict[str, str]]:
    ranged = summary["plausible_low"].is_not_null().any()
    rows = []
    for r in summary.iter_rows(named=True):
        share = r["metric_type"] == "choice-share-difference"
        rows.append(
            {
                "experiment": r["experimentSlug"],
                "model": f"{r['model']} [{r['modelKey']}]",
                "strategy": r["strategy"],
                "condition 0": fmt(r["stat_0"]) + (" share" if share else " mean"),
                "condition 1": fmt(r["stat_1"]) + (" share" if share else " mean"),
                "effect [95% CI]": f"{fmt(r['effect'])} [{fmt(r['ci_low'])}, "
                f"{fmt(r['ci_high'])}]{dagger(r)}",
                "p": fmt(r["p_value"], 2),
                "robust shift (HL) [95% CI]": robust_cell(r),
                "valid n (0 / 1)": f"{r['n_valid_0']} / {r['n_valid_1']}",
            }
            | (
                {
                    "outside plausible range": "–"
                    if r["n_implausible"] is None
                    else str(r["n_implausible"])
                }
                if ranged
                else {}
            )
            | {"flags": "; ".join(r["flags"]) or "none"}
        )
    return rows


def _distribution_sets(run: Run, summary: pl.DataFrame):
    answers = (
        final_records(run)
        .filter(pl.col("status") == "ok")
        .select(
            "job", "experimentSlug", "strategy", "modelKey", "conditionIndex", "value", "choice"
        )
        .collect()
    )
    for r in summary.iter_rows(named=True):
        exp = run.jobs[r["job"]].experiment(r["experimentSlug"])
        labels = pl.DataFrame(
            {
                "conditionIndex": [c.index for c in exp.conditions],
                "label": [c.label for c in exp.conditions],
            }
        )
        part = answers.filter(
            (pl.col("job") == r["job"])
            & (pl.col("experimentSlug") == r["experimentSlug"])
            & (pl.col("strategy") == r["strategy"])
            & (pl.col("modelKey") == r["modelKey"])
        )
        kind = "choice" if r["metric_type"] == "choice-share-difference" else "value"
        yield r, part.join(labels, on="conditionIndex", how="left", coalesce=True), kind


def report(summary: pl.DataFrame, run: Run, out_dir: Path) -> ReportPart:
    part = ReportPart()
    if not summary.height:
        return part
    part.sections.append(
        Section(
            "Effects",
            paired_note(summary),
            _effect_rows(summary),
            (("forest", plots.forest(summary, out_dir / "forest.png")),),
        )
    )
    for r, values, kind in _distribution_sets(run, summary):
        name = re.sub(
            r"[^a-z0-9-]+", "-", f"{r['experimentSlug']}-{r['modelKey']}-{r['strategy']}".lower()
        )
        title = f"{r['experimentSlug']} · {r['model']} [{r['modelKey']}] · {r['strategy']}"
        part.figures.append(
            Figure(title, name, plots.distribution(values, title, kind, out_dir / f"{name}.png"))
        )
    return part

"""The paper's bias scores (Equation 1): per model, the share of answers choosing the target in
treatment minus that share in control, with a Newcombe 95% CI and the pooled z-test's p.

Which items and which role each score counts (section 3.3 of the paper):
- Decoy Cheaper / Decoy Expensive (the four products pooled): treatment items whose target is
  the cheaper / the dearer option, share choosing the target; control (the pair alone), share
  choosing that same option. Every control item counts in both scores.
- Certainty: share choosing the safe option (sure in treatment, its scaled counterpart in control).
- Belief Valid: valid arguments, share answering "valid": believable real-term conclusions in
  treatment, all invented-word ones in control. Belief Invalid: invalid arguments, share
  answering "invalid": unbelievable real-term conclusions against all invented-word ones.
Shares are among parsed answers; parse failures and refusals are counted beside them.
"""
from __future__ import annotations

import polars as pl

from orchestrator.analysis.load import Run, final_records
from orchestrator.analysis.stats import newcombe
from orchestrator.report.format import fmt
from orchestrator.studies.base import Section

SCORES = ("Decoy Cheaper", "Decoy Expensive", "Certainty", "Belief Valid", "Belief Invalid")


def item_scores(experiment_label: str, condition: int, item: dict) -> list[tuple[str, str]]:
    """(score, target role) pairs an item counts in."""
    if experiment_label == "decoy effect":
        if condition == 0:
            return [("Decoy Cheaper", "cheaper"), ("Decoy Expensive", "expensive")]
        return [(f"Decoy {item['side'].title()}", "target")]
    if experiment_label == "certainty effect":
        return [("Certainty", "safe")]
    consistent = item["believable"] == (item["form"] == "valid")
    if condition == 0 or consistent:
        return [(f"Belief {item['form'].title()}", item["form"])]
    return []


def items_frame(run: Run, kind: str) -> pl.DataFrame:
    rows = []
    for job in run.jobs.values():
        if job.kind != kind:
            continue
        for exp in job.experiments:
            for cond in exp.conditions:
                for v in cond.variants:
                    for score, role in item_scores(exp.metric.label, cond.index, v.item or {}):
                        rows.append((job.id, exp.slug, cond.index, v.id, score, role))
    return pl.DataFrame(rows, orient="row", schema={
        "job": pl.String, "experimentSlug": pl.String, "conditionIndex": pl.Int64,
        "variant": pl.String, "score": pl.String, "target": pl.String})


def bias_scores(run: Run, kind: str = "instructed") -> pl.DataFrame:
    items = items_frame(run, kind).lazy()
    counts = (final_records(run).join(items, on=["job", "experimentSlug", "conditionIndex", "variant"])
              .group_by("modelKey", "score", "conditionIndex")
              .agg((pl.col("status") == "ok").sum().alias("n"),
                   (pl.col("status") != "ok").sum().alias("unparsed"),
                   (pl.col("role") == pl.col("target")).sum().alias("hits"))
              .collect())
    if not counts.height:
        return pl.DataFrame()
    wide = (counts.filter(pl.col("conditionIndex") == 1).drop("conditionIndex")
            .join(counts.filter(pl.col("conditionIndex") == 0).drop("conditionIndex"),
                  on=["modelKey", "score"], how="full", coalesce=True, suffix="_control")
            .fill_null(0).rename({"n": "n_treatment", "hits": "hits_treatment",
                                  "unparsed": "unparsed_treatment"}))
    diff, low, high, p = newcombe(wide["hits_treatment"].to_numpy(), wide["n_treatment"].to_numpy(),
                                  wide["hits_control"].to_numpy(), wide["n_control"].to_numpy())
    names = run.models
    order = {s: i for i, s in enumerate(SCORES)}
    return (wide.with_columns(
                pl.col("modelKey").replace_strict(names, default=pl.col("modelKey")).alias("model"),
                (pl.col("hits_treatment") / pl.col("n_treatment")).alias("share_treatment"),
                (pl.col("hits_control") / pl.col("n_control")).alias("share_control"),
                pl.Series("bias_score", diff), pl.Series("ci_low", low), pl.Series("ci_high", high),
                pl.Series("p", p))
            .with_columns(pl.col("score").replace_strict(order, default=len(order)).alias("_o"))
            .sort("modelKey", "_o").drop("_o"))


NOTE = ("Bias score (the paper's Equation 1): share of parsed answers choosing the target in "
        "treatment minus in control; > 0 is the direction of the human bias. Decoy: the target's "
        "share with the decoy against the same option's share in the pair alone (products pooled); "
        "Certainty: the safe option; Belief Valid / Invalid: the correct answer on believable valid / "
        "unbelievable invalid real-term arguments against invented-word ones. 95% CI: Newcombe "
        "(hybrid Wilson); p: pooled two-proportion z-test. Not yet computed: the paper's t-test, the "
        "attraction measure among target-or-competitor answers, difference-in-differences between "
        "models, per-product scores, scoring-mode (log-likelihood, DC-PMI) answers.")


def section(scores: pl.DataFrame, run: Run) -> Section:
    rows = [{"model": r["model"], "bias score": r["score"],
             "treatment": f"{fmt(r['share_treatment'])} (n={r['n_treatment']})",
             "control": f"{fmt(r['share_control'])} (n={r['n_control']})",
             "score [95% CI]": f"{fmt(r['bias_score'])} [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
             "p": fmt(r["p"], 3), "unparsed": str(r["unparsed_treatment"] + r["unparsed_control"])}
            for r in scores.iter_rows(named=True)]
    return Section("Instructed to Bias: bias scores", NOTE, rows)


def print_table(scores: pl.DataFrame, console) -> None:
    from rich.markup import escape
    from rich.table import Column, Table
    table = Table("model", "bias score", Column("treatment", justify="right"),
                  Column("control", justify="right"), Column("score [95% CI]", justify="right"),
                  Column("p", justify="right"), title="Instructed to Bias: bias scores (Equation 1)")
    for r in section(scores, None).rows:
        table.add_row(escape(r["model"]), r["bias score"], r["treatment"], r["control"],
                      r["score [95% CI]"], r["p"])
    console.print(table)

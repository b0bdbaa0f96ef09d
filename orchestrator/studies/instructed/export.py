"""Export of the study's answers, one row per final result (ok, parse_error, refused,
too_long), as CSV (`instructed-csv`) or parquet (`instructed-parquet`): the model, the dataset,
the condition, the item (its id, template, values, option order and `value_cell`, the unit
the analysis's tests count), the answer, whether it chose the target, and how it was chosen.

The candidates' scores of a scored answer are one column per option position (the order the
options were shown, as in `options`): `logp_<k>` (the candidate's log-probability after the
prompt), `premise_<k>` (after "Answer:" alone) and `pmi_<k>` (their difference, whose argmax is
the choice); null for a generated answer (`mode` "generate"). A decoy control item counts in
both decoy scores with opposite targets (`target` "cheaper; expensive"): its `chose_target` is
null, and `role` says which it chose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from orchestrator.analysis.load import open_run
from orchestrator.engine.files import write_file
from orchestrator.studies.instructed.analysis import rank
from orchestrator.studies.instructed.answers import scan
from orchestrator.studies.instructed.items import (
    ITEM_KEYS,
    experiments,
    item_scores,
    shared_styles,
    value_cell,
)

FORMATS = {"instructed-csv": "csv", "instructed-parquet": "parquet"}
STEM = "instructed-answers"
CANDIDATE_FIELDS = ("logp", "premise", "pmi")


def _column(values: list[Any]) -> pl.Series:
    """An item value's column: numbers mixed with integers read as floats; any other mix as text."""
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int, float} and float in kinds:
        return pl.Series([None if v is None else float(v) for v in values], dtype=pl.Float64)
    if len(kinds) > 1:
        return pl.Series([None if v is None else str(v) for v in values], dtype=pl.String)
    return pl.Series(values, strict=False)


def item_table(run, kind: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(one row per item with its facts, one row per item and shown option with its position)."""
    rows, positions = [], []
    for job_id, exp in experiments(run, kind):
        shared = shared_styles(exp)
        for cond in exp.conditions:
            for v in cond.variants:
                item = dict(v.item or {})
                scores = item_scores(exp.metric.label, cond.index, item, shared)
                targets = v.predicted or "; ".join(role for _, role in scores)
                key = (job_id, exp.slug, cond.index, v.id)
                rows.append(
                    {
                        "job": job_id,
                        "experimentSlug": exp.slug,
                        "conditionIndex": cond.index,
                        "variant": v.id,
                        "bias": exp.metric.label,
                        "product": v.domain,
                        "condition": cond.label,
                        "template": item.pop("template", None),
                        "option_order": item.pop("order", None),
                        "options": "; ".join(v.contract.options),
                        "roles": "; ".join(v.contract.roles),
                        "target": targets,
                        "bias_scores": "; ".join(s for s, _ in scores),
                        "value_cell": value_cell(exp.metric.label, item),
                        **{f"item_{k}": x for k, x in item.items() if k != "shown"},
                    }
                )
                positions += [(*key, option, k) for k, option in enumerate(v.contract.options, 1)]
    columns = list(dict.fromkeys(c for r in rows for c in r))
    items = pl.DataFrame({c: _column([r.get(c) for r in rows]) for c in columns})
    return items, pl.DataFrame(
        positions,
        orient="row",
        schema={
            "job": pl.String,
            "experimentSlug": pl.String,
            "conditionIndex": pl.Int64,
            "variant": pl.String,
            "option": pl.String,
            "position": pl.Int64,
        },
    )


def candidate_columns(answers: pl.DataFrame, positions: pl.DataFrame, most: int) -> pl.DataFrame:
    """`_row` and logp_k, premise_k, pmi_k per option position k (1..most): null where the answer
    was generated or gave no score for that option."""
    scored = (
        answers.filter(pl.col("scores").is_not_null())
        .select("_row", *ITEM_KEYS, "scores")
        .explode("scores")
        .drop_nulls("scores")
        .unnest("scores")
        .join(positions, on=[*ITEM_KEYS, "option"])
    )
    out = answers.select("_row")
    for k in range(1, most + 1):
        at = (
            scored.filter(pl.col("position") == k)
            .unique("_row", keep="first", maintain_order=True)
            .select("_row", *(pl.col(f).alias(f"{f}_{k}") for f in CANDIDATE_FIELDS))
        )
        out = out.join(at, on="_row", how="left")
    return out


def answers_table(run_dir: Path, kind: str = "instructed") -> pl.DataFrame:
    run = open_run(run_dir)
    jobs = [j.id for j in run.jobs.values() if j.kind == kind]
    if not jobs:
        return pl.DataFrame()
    items, positions = item_table(run, kind)
    records = scan(run, jobs, leave_out=("failed",)).collect().with_row_index("_row")
    if not records.height:
        return pl.DataFrame()
    most = int(positions.group_by(ITEM_KEYS).len()["len"].max())
    names = run.models
    slugs = [e.slug for _, e in experiments(run, kind)]
    table = (
        records.join(items, on=ITEM_KEYS, how="left")
        .join(candidate_columns(records, positions, most), on="_row", how="left")
        .with_columns(
            pl.col("modelKey").replace_strict(names, default=pl.col("modelKey")).alias("model"),
            pl.when((pl.col("status") == "ok") & ~pl.col("target").str.contains("; "))
            .then(pl.col("role") == pl.col("target"))
            .alias("chose_target"),
            rank("modelKey", list(names)).alias("_m"),
            rank("experimentSlug", slugs).alias("_e"),
        )
        .sort("_m", "strategy", "_e", "conditionIndex", "variant", "sample")
    )
    first = [
        "model",
        "modelKey",
        "strategy",
        "job",
        "bias",
        "experimentSlug",
        "product",
        "condition",
        "conditionIndex",
        "variant",
        "sample",
        "template",
    ]
    item_columns = [c for c in items.columns if c.startswith("item_")]
    answer = [
        "option_order",
        "options",
        "roles",
        "status",
        "choice",
        "role",
        "target",
        "chose_target",
        "bias_scores",
        "mode",
    ]
    candidates = [f"{f}_{k}" for k in range(1, most + 1) for f in CANDIDATE_FIELDS]
    return table.select(*first, *item_columns, *answer, *candidates, "taskId")


def export_answers(name: str, run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """Write the answers table as CSV or parquet (`name`: one of FORMATS); nothing when the run
    holds no answer of this study."""
    table = answers_table(run_dir)
    if not table.height:
        return {}
    path = out_dir / f"{STEM}.{FORMATS[name]}"
    if FORMATS[name] == "csv":
        path = write_file(path, table.write_csv, within=out_dir)
    else:
        path = write_file(path, table.write_parquet, within=out_dir)
    return {path: table.height}

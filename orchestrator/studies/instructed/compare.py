"""Beside the bias scores: belief-bias accuracy on logical validity (the paper's section 6.3),
and the difference-in-differences between two models (its pretrained vs instruction-tuned
contrast, section 5).

Accuracy: the share of parsed belief answers whose answer is the argument's form (valid or
invalid), per model and strategy, in real words (treatment), invented words (control) and
both, with a Wilson 95% interval.

Difference-in-differences: for every pair of models in the run's order (the first minus the
second), each bias score's difference, tested over value cells like the scores themselves
(inference.py `clustered`): the two models answered the same items, so each value cell holds
both models' answers in both arms, and CR2 over the cells takes in whatever the models' answers
share through the items. (Testing them as independent samples, as this table did before, was
not conservative: each model's own variance took every prompt as an independent draw.)
"""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl

from orchestrator.analysis.load import Run
from orchestrator.analysis.stats import wilson, zero
from orchestrator.studies.instructed.analysis import CELL_KEYS, rank
from orchestrator.studies.instructed.answers import answers
from orchestrator.studies.instructed.inference import TWO_MODELS, clustered
from orchestrator.studies.instructed.items import ITEM_KEYS, belief_frame

WORDS = ("invented", "real", "all")


def belief_accuracy(run: Run, kind: str = "instructed") -> pl.DataFrame:
    ok = pl.col("status") == "ok"
    joined = answers(run, kind).join(belief_frame(run, kind).lazy(), on=ITEM_KEYS)
    agg = {
        "n": ok.sum(),
        "correct": (ok & (pl.col("role") == pl.col("correct"))).sum(),
        "unparsed": (~ok).sum(),
    }
    per_words = joined.group_by("modelKey", "strategy", "words").agg(**agg)
    both = joined.group_by("modelKey", "strategy").agg(**agg).with_columns(words=pl.lit("all"))
    table = pl.concat([per_words, both.select(per_words.collect_schema().names())]).collect()
    if not table.height:
        return pl.DataFrame()
    low, high = wilson(table["correct"].to_numpy(), table["n"].to_numpy())
    names = run.models
    return (
        table.with_columns(
            pl.col("modelKey").replace_strict(names, default=pl.col("modelKey")).alias("model"),
            (pl.col("correct") / pl.col("n")).alias("accuracy"),
            pl.Series("ci_low", low),
            pl.Series("ci_high", high),
            rank("modelKey", list(names)).alias("_m"),
            pl.col("words")
            .replace_strict({w: i for i, w in enumerate(WORDS)}, return_dtype=pl.Int64)
            .alias("_w"),
        )
        .fill_nan(None)
        .sort("_m", "strategy", "_w")
        .drop("_m", "_w")
        .select(
            "model",
            "modelKey",
            "strategy",
            "words",
            "n",
            "correct",
            "unparsed",
            "accuracy",
            "ci_low",
            "ci_high",
        )
    )


DID_COLUMNS = [
    "strategy",
    "score",
    "model_a",
    "modelKey_a",
    "model_b",
    "modelKey_b",
    "bias_a",
    "bias_b",
    "did",
    "ci_low",
    "ci_high",
    "p",
    "cells",
    "df",
    "note",
]


def _cell_groups(cells: pl.DataFrame, key_a: str, key_b: str) -> tuple[np.ndarray, np.ndarray]:
    """(K, 4) answers and hits per value cell: control and treatment of a, then of b."""
    groups = [(key_a, 0), (key_a, 1), (key_b, 0), (key_b, 1)]
    wide = cells.group_by(CELL_KEYS).agg(
        *(
            pl.col(c)
            .filter((pl.col("modelKey") == m) & (pl.col("conditionIndex") == a))
            .sum()
            .alias(f"{c}{i}")
            for c in ("n", "hits")
            for i, (m, a) in enumerate(groups)
        )
    )
    return (
        wide.select(f"n{i}" for i in range(4)).to_numpy(),
        wide.select(f"hits{i}" for i in range(4)).to_numpy(),
    )


def differences(scores: pl.DataFrame, cells: pl.DataFrame) -> pl.DataFrame:
    """Every pair of models (in the order of `scores`, which is the run's), per strategy and
    score: bias_a - bias_b with its 95% CI and p over value cells (`cells`: the counts per
    value cell analysis.all_scores gives). Empty with fewer than two models."""
    if not scores.height:
        return pl.DataFrame()
    keys = scores["modelKey"].unique(maintain_order=True).to_list()
    side = scores.select("modelKey", "model", "strategy", "score", "bias_score")
    rows = []
    for strategy, score in side.select("strategy", "score").unique(maintain_order=True).rows():
        here = cells.filter((pl.col("strategy") == strategy) & (pl.col("score") == score))
        bias = {
            r["modelKey"]: r
            for r in side.filter(
                (pl.col("strategy") == strategy) & (pl.col("score") == score)
            ).iter_rows(named=True)
        }
        for a, b in itertools.combinations([k for k in keys if k in bias], 2):
            test = clustered(*_cell_groups(here, a, b), TWO_MODELS, (0.0, 0.0, 0.0, -1.0))
            rows.append(
                {
                    "strategy": strategy,
                    "score": score,
                    "model_a": bias[a]["model"],
                    "modelKey_a": a,
                    "model_b": bias[b]["model"],
                    "modelKey_b": b,
                    "bias_a": bias[a]["bias_score"],
                    "bias_b": bias[b]["bias_score"],
                    "did": test["estimate"],
                    "ci_low": test["ci_low"],
                    "ci_high": test["ci_high"],
                    "p": test["p"],
                    "cells": test["cells"],
                    "df": test["df"],
                    "note": test["note"],
                }
            )
    if not rows:
        return pl.DataFrame()
    pair = {p: i for i, p in enumerate(itertools.combinations(keys, 2))}
    order = {s: i for i, s in enumerate(scores["score"].unique(maintain_order=True))}
    rows.sort(
        key=lambda r: (r["strategy"], pair[(r["modelKey_a"], r["modelKey_b"])], order[r["score"]])
    )
    return (
        pl.DataFrame(rows, infer_schema_length=None)
        .fill_nan(None)
        .with_columns(zero(pl.col("did")).alias("did"))
        .select(DID_COLUMNS)
    )

"""The difference-in-differences between two models (the paper's pretrained vs
instruction-tuned contrast, section 5): for every pair of models in the run's order (the first minus the
second), each bias score's difference, tested over value cells like the scores themselves
(inference.py `clustered`): the two models answered the same items, so each value cell holds
both models' answers in both arms, and CR2 over the cells takes in whatever the models' answers
share through the items. (Testing them as independent samples, as this table did before, was
not conservative: each model's own variance took every prompt as an independent draw.) A decoy
row's difference of Equation-1 scores is a description without a p or interval (a third
option biases Equation 1: analysis.DESCRIBED); the difference of the attraction measures beside
it is tested the same way.
"""

from __future__ import annotations

import itertools

import polars as pl

from orchestrator.analysis.stats import zero
from orchestrator.studies.instructed.analysis import PAIR_ANSWERS, decoy_described, per_cell
from orchestrator.studies.instructed.inference import TWO_MODELS, clustered

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
    "attraction_did",
    "attraction_ci_low",
    "attraction_ci_high",
    "attraction_p",
    "attraction_note",
]
A_MINUS_B = (0.0, 0.0, 0.0, -1.0)  # TWO_MODELS' last coefficient is b's bias minus a's


def _two_models(key_a: str, key_b: str) -> list[pl.Expr]:
    """TWO_MODELS' groups: control and treatment of a, then of b."""
    return [
        (pl.col("modelKey") == m) & (pl.col("conditionIndex") == arm)
        for m in (key_a, key_b)
        for arm in (0, 1)
    ]


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
        here = cells.filter(
            (pl.col("strategy") == strategy) & (pl.col("score") == score)
        ).with_columns(PAIR_ANSWERS)
        bias = {
            r["modelKey"]: r
            for r in side.filter(
                (pl.col("strategy") == strategy) & (pl.col("score") == score)
            ).iter_rows(named=True)
        }
        for a, b in itertools.combinations([k for k in keys if k in bias], 2):
            groups = _two_models(a, b)
            test = clustered(*per_cell(here, groups), TWO_MODELS, A_MINUS_B)
            pair = (
                clustered(*per_cell(here, groups, "n_pair"), TWO_MODELS, A_MINUS_B)
                if score.startswith("Decoy")
                else dict.fromkeys(("estimate", "ci_low", "ci_high", "p", "note"))
            )
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
                    **{f"attraction_{k}": pair[k] for k in ("ci_low", "ci_high", "p", "note")},
                    "attraction_did": pair["estimate"],
                }
            )
    if not rows:
        return pl.DataFrame()
    pair = {p: i for i, p in enumerate(itertools.combinations(keys, 2))}
    order = {s: i for i, s in enumerate(scores["score"].unique(maintain_order=True))}
    rows.sort(
        key=lambda r: (r["strategy"], pair[(r["modelKey_a"], r["modelKey_b"])], order[r["score"]])
    )
    table = (
        pl.DataFrame(rows, infer_schema_length=None)
        .fill_nan(None)
        .with_columns(zero(pl.col(c)).alias(c) for c in ("did", "attraction_did"))
        .select(DID_COLUMNS)
    )
    return decoy_described(table, ("ci_low", "ci_high", "p", "df"))

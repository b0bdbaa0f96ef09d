"""Beside the bias scores: belief-bias accuracy on logical validity (the paper's section 6.3),
and the difference-in-differences between two models (its pretrained vs instruction-tuned
contrast, section 5).

Accuracy: the share of parsed belief answers whose answer is the argument's form (valid or
invalid), per model and strategy, in real words (treatment), invented words (control) and
both, with a Wilson 95% interval.

Difference-in-differences: for every pair of models in the run's order (the first minus the
second), each bias score's difference. The two models answered the same items but are scored
as independent samples: the variances of their scores add, giving a normal 95% interval and a
z-test. Each variance is Agresti and Caffo's (one answer of each kind added per sample): the
plain Wald variance is 0 where every answer of a condition is alike, and would give two such
models a difference of 0 [0, 0]. Where item effects are shared by both models this is conservative (a positive
correlation would shrink the difference's variance).
"""

from __future__ import annotations

import itertools

import polars as pl

from orchestrator.analysis.load import Run
from orchestrator.analysis.stats import wilson, zero
from orchestrator.studies.instructed.analysis import rank
from orchestrator.studies.instructed.answers import answers
from orchestrator.studies.instructed.inference import difference
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
]


def differences(scores: pl.DataFrame) -> pl.DataFrame:
    """Every pair of models (in the order of `scores`, which is the run's), per strategy and
    score: bias_a - bias_b with its 95% CI and z-test p. Empty with fewer than two models."""
    if not scores.height:
        return pl.DataFrame()
    keys = scores["modelKey"].unique(maintain_order=True).to_list()
    pairs = pl.DataFrame(
        list(itertools.combinations(keys, 2)),
        orient="row",
        schema={"modelKey_a": pl.String, "modelKey_b": pl.String},
    ).with_row_index("_p")
    if not pairs.height:
        return pl.DataFrame()
    side = scores.select(
        "modelKey", "model", "strategy", "score", bias="bias_score", se="se_adjusted"
    )
    a = side.rename({c: f"{c}_a" for c in ("modelKey", "model", "bias", "se")})
    b = side.rename({c: f"{c}_b" for c in ("modelKey", "model", "bias", "se")})
    both = pairs.join(a, on="modelKey_a").join(b, on=["modelKey_b", "strategy", "score"])
    rank = {s: i for i, s in enumerate(scores["score"].unique(maintain_order=True))}
    both = both.with_columns(
        pl.col("score").replace_strict(rank, return_dtype=pl.Int64).alias("_s")
    ).sort("strategy", "_p", "_s")
    did, low, high, p = difference(
        *(both[c].to_numpy() for c in ("bias_a", "se_a", "bias_b", "se_b"))
    )
    return (
        both.with_columns(
            pl.Series("did", did),
            pl.Series("ci_low", low),
            pl.Series("ci_high", high),
            pl.Series("p", p),
        )
        .fill_nan(None)
        .with_columns(zero(pl.col("did")).alias("did"))
        .select(DID_COLUMNS)
    )

"""Belief-bias accuracy on logical validity (the paper's section 6.3): the share of parsed
belief answers whose answer is the argument's form (valid or invalid), per model and strategy,
in real words (treatment), invented words (control) and both.

Its 95% interval is over term families (the value cells of belief items: a family's syllogisms
in every template and premise order are one draw for a model answering by content), CR2 with a
Bell-McCaffrey t as the bias scores', clipped to [0, 1]; a Wilson interval would take every
prompt as an independent draw.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.load import Run
from orchestrator.studies.instructed.analysis import rank
from orchestrator.studies.instructed.answers import answers
from orchestrator.studies.instructed.inference import ALIKE, NO_RELABELLING, clustered
from orchestrator.studies.instructed.items import ITEM_KEYS, belief_frame

WORDS = ("invented", "real", "all")
ONE_GROUP = np.ones((1, 1))


def _interval(cells: pl.DataFrame) -> dict:
    test = clustered(
        cells["n"].to_numpy()[:, None], cells["correct"].to_numpy()[:, None], ONE_GROUP, (1.0,)
    )
    low, high = (np.clip(test[k], 0.0, 1.0) for k in ("ci_low", "ci_high"))
    note = test["note"]
    if note in (ALIKE, NO_RELABELLING):  # one group: a share has no relabelling to test by
        note = "every term family has the same accuracy: no interval over families"
    return {"ci_low": low, "ci_high": high, "cells": test["cells"], "note": note}


def belief_accuracy(run: Run, kind: str = "instructed") -> pl.DataFrame:
    ok = pl.col("status") == "ok"
    joined = answers(run, kind).join(belief_frame(run, kind).lazy(), on=ITEM_KEYS)
    agg = {
        "n": ok.sum(),
        "correct": (ok & (pl.col("role") == pl.col("correct"))).sum(),
        "unparsed": (~ok).sum(),
    }
    cells = joined.group_by("modelKey", "strategy", "words", "experimentSlug", "cluster").agg(**agg)
    both = cells.with_columns(words=pl.lit("all"))
    per_cell = pl.concat([cells, both]).collect()
    if not per_cell.height:
        return pl.DataFrame()
    rows = []
    for (model, strategy, words), part in per_cell.group_by(
        "modelKey", "strategy", "words", maintain_order=True
    ):
        totals = {k: int(part[k].sum()) for k in agg}
        rows.append(
            {"modelKey": model, "strategy": strategy, "words": words, **totals} | _interval(part)
        )
    table = pl.DataFrame(rows, infer_schema_length=None)
    names = run.models
    return (
        table.with_columns(
            pl.col("modelKey").replace_strict(names, default=pl.col("modelKey")).alias("model"),
            (pl.col("correct") / pl.col("n")).alias("accuracy"),
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
            "cells",
            "note",
        )
    )

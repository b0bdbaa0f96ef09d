"""The viewer's listing frame: the columns of the record lines that its lists, filters and
counts need, read from the columnar snapshot (engine/columnar.py), and the rule that keeps each
task's final record (engine/results.final_mask)."""

from __future__ import annotations

from typing import Any

import polars as pl

from orchestrator.engine.columnar import Records
from orchestrator.engine.results import final_mask

SCHEMA = {
    "taskId": pl.String,
    "status": pl.String,
    "modelKey": pl.String,
    "experimentSlug": pl.String,
    "conditionIndex": pl.Int64,
    "sample": pl.Int64,
    "job": pl.String,
    "variant": pl.String,
    "strategy": pl.String,
    "optionOrder": pl.List(pl.String),
    "response": pl.Struct({"value": pl.Float64, "choice": pl.String, "raw": pl.String}),
    "latencyMs": pl.Float64,
    "costUsd": pl.Float64,
}
LIST_RAW_CHARS = 4096  # what of an answer the lists hold (and search): its start
READ_ROWS = 50_000  # rows of a whole log decoded at a time


def read(lf: pl.LazyFrame) -> pl.DataFrame:
    """The listing's columns of every record line (`offset`: where the line starts in the log)."""
    return _columns(lf).collect()


def read_whole(found: Records) -> list[pl.DataFrame]:
    """read() of a whole log, READ_ROWS at a time: decoding a million rows of Parquet at once
    held 90 MB more at its peak than the frame it gives."""
    chunks = []
    for piece in found.pieces():
        rows = piece.select(pl.len()).collect().item()  # a Parquet file's: from its footer
        query = _columns(piece)
        chunks += [query.slice(at, READ_ROWS).collect() for at in range(0, rows, READ_ROWS)]
    return chunks


def _columns(lf: pl.LazyFrame) -> pl.LazyFrame:
    return lf.select(
        *(k for k in SCHEMA if k not in ("response", "optionOrder")),
        "offset",
        pl.col("optionOrder").list.join("|").alias("order"),
        pl.col("response")
        .struct.field("choice")
        .fill_null(pl.col("response").struct.field("value").cast(pl.String))
        .alias("answer"),
        # lists show the start of an answer: a 100 MB one is not kept whole in the frame
        pl.col("response").struct.field("raw").str.slice(0, LIST_RAW_CHARS).alias("raw"),
    )


def spend(df: pl.DataFrame) -> dict[str, float]:
    return dict(df.group_by("modelKey").agg(pl.col("costUsd").sum()).iter_rows())


def final_lines(df: pl.DataFrame) -> pl.Series:
    """A mask of each task's final line (engine/results.final_mask: the rule every reader uses)."""
    return df.select(final_mask(df)).to_series()


def empty() -> pl.DataFrame:
    schema: dict[str, Any] = {
        **{k: v for k, v in SCHEMA.items() if k not in ("response", "optionOrder")},
        "offset": pl.UInt64,
        "order": pl.String,
        "answer": pl.String,
        "raw": pl.String,
        "study": pl.String,
        "cell": pl.UInt32,
    }
    return pl.DataFrame(schema=schema)

"""A run's final records as one flat table: every design column (with each condition's label
and each experiment's bias slug, as the manifest's jobs name them), the rendered prompt, the
answer and what was parsed of it. What `export --format parquet` and `--format csv` write and
the Inspect logs are made of (interop/inspect_log.py).

The records come from the log (the snapshot keeps only the start of each answer): its lines are
checked through the snapshot (engine/columnar.py), which also says which line is each task's
final record (engine/results.final_mask) and where it starts; only those lines are parsed in
full. A record whose cell the plan no longer has gets no prompt (its `prompt` is null). Their messages come
from the plan (rebuilt from the manifest, as the viewer does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from orchestrator.engine.columnar import final_rows, lines_at
from orchestrator.engine.results import RESULTS
from orchestrator.engine.store import RunStore

MESSAGE = pl.Struct({"role": pl.String, "content": pl.String})
# What a final record gives each row, read from the log in full.
FULL: dict[str, Any] = {
    "response": pl.Struct(
        {
            "value": pl.Float64,
            "choice": pl.String,
            "role": pl.String,
            "reason": pl.String,
            "raw": pl.String,
            "reasoning": pl.String,
        }
    ),
    "usage": pl.Struct(
        {"prompt_tokens": pl.Int64, "completion_tokens": pl.Int64, "reasoning_tokens": pl.Int64}
    ),
    "error": pl.String,
    "startedAt": pl.String,
}


def final_table(run_dir: Path) -> pl.DataFrame:
    """One row per task with a final record, in the log's order."""
    from orchestrator.analysis.names import model_names
    from orchestrator.viewer.cells import Cells

    path = run_dir / RESULTS
    final = final_rows(path).with_row_index("line")
    full = pl.DataFrame(
        _final_fields(path, final["offset"]), schema=FULL, orient="row"
    ).with_columns(final["line"])
    cells = Cells(run_dir)
    df = (
        final.join(full, on="line", how="left", suffix="_full")
        .join(_design(cells.plan.campaign.jobs), on=DESIGN_KEY, how="left")
        .sort("line")
        .with_columns(
            labels(cells.plan.campaign.jobs, model_names(RunStore(run_dir).read_manifest()))
        )
    )
    rows = df.select(
        "taskId",
        "job",
        "experimentSlug",
        "conditionIndex",
        "variant",
        "strategy",
        "modelKey",
        "optionOrder",
        "sample",
    ).iter_rows(named=True)
    messages = [_messages(cells, r) for r in rows]
    r = pl.col("response_full").struct
    whole = {
        "messages": pl.Series("messages", messages, dtype=pl.List(MESSAGE)),
        "prompt": pl.Series(
            "prompt", [m[-1]["content"] if m else None for m in messages], dtype=pl.String
        ),
        "reason": r.field("reason").alias("reason"),
        "reasoning": r.field("reasoning").alias("reasoning"),
        "error": pl.col("error"),
        "startedAt": pl.col("startedAt"),
    }
    return df.select(_columns("response_full", whole))


def final_lazy(run_dir: Path) -> pl.LazyFrame:
    """final_table's rows as a lazy frame over the results' columnar snapshot, for runs of a
    million records: without what only the whole log holds (messages, prompt, reason,
    reasoning, error, startedAt) and with each answer cut to the snapshot's first RAW_CHARS
    characters. Which line is a task's final one is read now (two columns); the rest when
    collected."""
    from orchestrator.analysis.names import model_names
    from orchestrator.engine.columnar import records
    from orchestrator.engine.results import final_mask
    from orchestrator.engine.run_folder import manifest_jobs

    manifest = RunStore(run_dir).read_manifest()
    jobs = list(manifest_jobs(manifest, run_dir).values())
    frame = records(run_dir / RESULTS).frame
    ids = frame.select(pl.col("taskId").hash().alias("id"), "status").collect()
    final = ids.select(final_mask(ids, "id")).to_series().arg_true()
    return (
        frame.with_row_index("line")
        .filter(pl.col("line").is_in(final.implode()))
        .join(_design(jobs).lazy(), on=DESIGN_KEY, how="left", maintain_order="left")
        .with_columns(labels(jobs, model_names(manifest)))
        .select(_columns("response"))
    )


def _columns(response: str, whole: dict[str, Any] | None = None) -> list[Any]:
    """The table's columns, in order: what a record's line holds (`response`: the column of
    its response), and with `whole`, final_table's, what only the whole log and the plan
    give (messages, prompt, reason, reasoning, error, startedAt) in their places."""
    r, u = pl.col(response).struct, pl.col("usage").struct

    def only_whole(*names: str) -> list[Any]:
        return [whole[name] for name in names] if whole else []

    return [
        "taskId",
        "status",
        "modelKey",
        "modelLabel",
        pl.col("model").struct.field("provider").alias("provider"),
        pl.col("model").struct.field("name").alias("model"),
        pl.col("model").struct.field("version").alias("modelVersion"),
        "study",
        "job",
        "experimentSlug",
        "biasSlug",
        "conditionIndex",
        "conditionLabel",
        "variant",
        "strategy",
        "sample",
        "optionOrder",
        *only_whole("messages", "prompt"),
        r.field("raw").alias("answer"),
        r.field("choice").alias("choice"),
        r.field("value").alias("value"),
        r.field("role").alias("role"),
        *only_whole("reason", "reasoning"),
        "attempts",
        "latencyMs",
        "costUsd",
        u.field("prompt_tokens").alias("promptTokens"),
        u.field("completion_tokens").alias("completionTokens"),
        u.field("reasoning_tokens").alias("reasoningTokens"),
        "servedModel",
        "systemFingerprint",
        *only_whole("error", "startedAt"),
        "finishedAt",
    ]


DESIGN_KEY = ["job", "experimentSlug", "conditionIndex"]


def labels(jobs: list[Any], names: dict[str, str]) -> list[pl.Expr]:
    """`study` (the kind of the record's job) and `modelLabel` (the model's display name with
    the settings that tell apart identities sharing one: analysis/names.py); null for a job or
    a model the run's manifest does not name."""
    kinds = {job.id: job.kind for job in jobs}
    return [
        pl.col("job").replace_strict(kinds, default=None, return_dtype=pl.String).alias("study"),
        pl.col("modelKey")
        .replace_strict(names, default=None, return_dtype=pl.String)
        .alias("modelLabel"),
    ]


def _design(jobs: list[Any]) -> pl.DataFrame:
    """Each condition of the run's jobs (the manifest's): its label and its experiment's bias
    slug, by job, experiment and condition. A record of none of them gets nulls."""
    rows = {
        (job.id, e.slug, c.index): (e.bias_slug, c.label)
        for job in jobs
        for e in job.experiments
        for c in e.conditions
    }
    return pl.DataFrame(
        [(*key, *value) for key, value in rows.items()],
        schema={
            "job": pl.String,
            "experimentSlug": pl.String,
            "conditionIndex": pl.Int64,
            "biasSlug": pl.String,
            "conditionLabel": pl.String,
        },
        orient="row",
    )


def _final_fields(path: Path, offsets: pl.Series) -> list[tuple[Any, ...]]:
    """FULL's fields of the records at these byte offsets, each line parsed on its own (only
    the final records are parsed in full; the snapshot has the rest)."""
    import orjson

    return [
        tuple(orjson.loads(line).get(name) for name in FULL) for line in lines_at(path, offsets)
    ]


def _messages(cells: Any, row: dict[str, Any]) -> list[dict[str, str]] | None:
    cell = cells.of(row)
    return [{"role": m["role"], "content": m["content"]} for m in cell.messages] if cell else None


def export_parquet(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """records.parquet: every final record, one row each (zstd; polars, DuckDB, pandas and
    `datasets.load_dataset("parquet", ...)` read it)."""
    from orchestrator.engine.files import write_file

    table = final_table(run_dir)
    if not table.height:
        return {}
    path = write_file(
        out_dir / "records.parquet",
        lambda f: table.write_parquet(f, compression="zstd"),
        within=out_dir,
    )
    return {path: table.height}


def flat(table: pl.DataFrame) -> pl.DataFrame:
    """The table with what a CSV cell cannot hold made text: a list of texts joined with "; "
    (optionOrder; as analysis/summary.py writes its CSV), any other list or struct as its JSON
    (messages: `[{"role": ..., "content": ...}, ...]`). The columns and their order stay."""
    import orjson

    def as_json(column: pl.Series) -> pl.Series:
        return pl.Series(
            column.name,
            [orjson.dumps(v).decode() if v is not None else None for v in column.to_list()],
            dtype=pl.String,
        )

    return table.with_columns(
        pl.col(c).list.join("; ") if t == pl.List(pl.String) else as_json(table[c])
        for c, t in table.schema.items()
        if isinstance(t, pl.List | pl.Struct)
    )


def export_csv(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """records.csv: the parquet export's table, one row per final record, its lists flattened
    (flat)."""
    from orchestrator.engine.files import write_file

    table = final_table(run_dir)
    if not table.height:
        return {}
    path = write_file(out_dir / "records.csv", flat(table).write_csv, within=out_dir)
    return {path: table.height}

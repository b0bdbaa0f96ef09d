"""Reading a run for analysis: its manifest, its jobs, and its final records as a lazy frame."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from orchestrator.analysis.names import model_names
from orchestrator.engine.columnar import Records, records
from orchestrator.engine.results import RESULTS, check_results_path, first_of_task
from orchestrator.engine.run_folder import manifest_jobs
from orchestrator.engine.store import RunStore
from orchestrator.errors import UserError
from orchestrator.spec.identity import identity_key, is_deterministic
from orchestrator.spec.models import Job

# Only what analysis reads; everything else in a record is skipped by the scanner.
RESULT_SCHEMA = {
    "taskId": pl.String,
    "status": pl.String,
    "modelKey": pl.String,
    "experimentSlug": pl.String,
    "conditionIndex": pl.Int64,
    "sample": pl.Int64,
    "model": pl.Struct({"provider": pl.String, "name": pl.String, "version": pl.String}),
    "response": pl.Struct({"value": pl.Float64, "choice": pl.String, "role": pl.String}),
    "job": pl.String,
    "variant": pl.String,
    "strategy": pl.String,
}

NO_ANSWER = ["failed", "too_long", "skipped"]  # skipped: recorded without a call (a study guard)


@dataclass
class Run:
    path: Path
    manifest: dict[str, Any]
    jobs: dict[str, Job]
    records: Records  # its record lines as columns (engine/columnar.py), torn last line left out
    note: str | None = None  # about a torn last line that was skipped

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def models(self) -> dict[str, str]:
        """{model key: display name}: the label plus the settings that tell identities apart."""
        return model_names(self.manifest)

    def planned_per_cell(self, job_id: str, model_key: str | None = None) -> int:
        """Samples planned per cell of a job (on one model: a deterministic one may have fewer).
        Runs from before samples_by_model gave every model the job's samples."""
        plan = self.manifest["plan"]
        by_model = plan.get("samples_by_model", {}).get(model_key, {})
        return by_model.get(job_id, plan["samples"][job_id])

    @property
    def deterministic(self) -> dict[str, bool]:
        """Per model key: whether that identity is deterministic (temperature 0)."""
        return {identity_key(m): is_deterministic(m) for m in self.manifest["plan"]["models"]}


def open_run(path: Path) -> Run:
    """A run to analyse, its results file checked line by line first (a bad line is an error
    naming it; a torn last line is left out, and said so): polars alone would skip some bad
    lines without a word and stop at others with no line number. Nothing is written."""
    manifest = RunStore(path).read_manifest()
    jobs = manifest_jobs(manifest, path)
    results = path / RESULTS
    check_results_path(results)
    if not results.exists():
        raise UserError(
            "the run has no results yet",
            file=path,
            fix=f"run it first: orchestrator run {path}",
        )
    found = records(results)
    return Run(path, manifest, jobs, found, found.note())


def final_records(run: Run) -> pl.LazyFrame:
    """One row per answered task (ok, parse_error or refused), answers flattened to `value` and
    `choice`: its first terminal record, as every reader counts it (hashed ids: 8 MB per
    million tasks). Two statuses hold no answer and are left
    out, so that they count as unanswered (flagged as unfinished), never as model behaviour:
    `failed` lines are attempts that a later resume superseded or will retry, and `too_long`
    ones are requests the server would not take (a prompt over the context length)."""
    lf = run.records.frame.select(list(RESULT_SCHEMA))
    return (
        # a task's final record is its first terminal one (engine/results.final_mask); a
        # later one is a duplicate that two runs of one folder made before the run lock
        lf.filter(pl.col("status") != "failed")
        .filter(first_of_task())
        .filter(~pl.col("status").is_in(NO_ANSWER))
        .with_columns(
            pl.col("response").struct.field("value").alias("value"),
            pl.col("response").struct.field("choice").alias("choice"),
            pl.col("response").struct.field("role").alias("role"),
        )
        .drop("response")
    )

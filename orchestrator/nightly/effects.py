"""What compare and trend read of one run: every study's headline effects (analysis/effects.py)
and, per model and experiment, how the calls went and which model served them. Computed
afresh from the results; nothing is written into the run folder but the results' columnar
snapshot, a cache (engine/columnar.py): the night's own files stay as they were."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from orchestrator.analysis.effects import EFFECT_SCHEMA, empty
from orchestrator.analysis.load import Run, open_run
from orchestrator.analysis.summary import study_outputs
from orchestrator.engine.results import first_of_task

CALL_SCHEMA = {
    "taskId": pl.String,
    "status": pl.String,
    "modelKey": pl.String,
    "experimentSlug": pl.String,
    "latencyMs": pl.Float64,
    "costUsd": pl.Float64,
    "servedModel": pl.String,
    "systemFingerprint": pl.String,
}
TERMINAL = ["ok", "parse_error", "refused", "too_long", "skipped"]


@dataclass
class RunEffects:
    run: Run
    effects: pl.DataFrame  # EFFECT_SCHEMA
    calls: pl.DataFrame  # per modelKey x experimentSlug: see call_summary
    models: pl.DataFrame  # the same tallies per modelKey
    holder: str | None = None  # engine/lock.lock_state: "running (...)", "interrupted", None

    @property
    def name(self) -> str:
        return self.run.manifest["runId"]

    @property
    def pending(self) -> int:
        """Planned tasks without a final record: a night still running, or cut short."""
        return self.run.manifest["plan"]["tasks"] - int(self.models["records"].sum())

    def served_by_model(self) -> pl.DataFrame:
        """Per model: the served model strings and the fingerprints it named in any experiment
        (lists, sorted)."""

        def union(column: str) -> pl.Expr:
            return (
                pl.col(column)
                .explode(keep_nulls=False, empty_as_null=False)
                .drop_nulls()
                .unique()
                .sort()
            )

        return self.calls.group_by("modelKey").agg(union("served"), union("fingerprints"))

    def unfinished(self) -> str | None:
        """Why this night is not a whole one, or None."""
        if not self.pending and not (self.holder or "").startswith("running"):
            return None
        planned = self.run.manifest["plan"]["tasks"]
        return f"{self.name}: {planned - self.pending:,} of {planned:,} tasks done" + (
            f" ({self.holder})" if self.holder else ""
        )


def study_effects(run: Run) -> pl.DataFrame:
    frames = []
    for study, outputs in study_outputs(run):
        tables = {out.stem: out.frame for out in outputs}
        found = study.effects(tables) if tables else None
        if found is not None and found.height:
            frames.append(found.select(list(EFFECT_SCHEMA)))
    effects = pl.concat(frames) if frames else empty()
    # a model at temperature 0 answers one draw: its effects have no spread to test against
    return effects.with_columns(
        deterministic=pl.col("modelKey").replace_strict(
            run.deterministic, default=False, return_dtype=pl.Boolean
        )
    )


def _tallies(status: pl.Expr, answered: pl.Expr) -> list[pl.Expr]:
    return [
        status.is_in(TERMINAL).sum().alias("records"),
        answered.sum().alias("answered"),
        (status == "parse_error").sum().alias("parse_errors"),
        (status == "refused").sum().alias("refusals"),
        (status == "failed").sum().alias("failed_lines"),
        pl.col("latencyMs").filter(answered).quantile(0.5, "linear").alias("latency_p50"),
        pl.col("latencyMs").filter(answered).quantile(0.95, "linear").alias("latency_p95"),
        pl.col("costUsd").filter(status.is_in(TERMINAL)).mean().alias("cost_per_call"),
    ]


def call_summary(run: Run) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per model x experiment, per model): tasks by final status, latency p50/p95 of answered
    calls (ms), cost per call (USD, where priced); per model x experiment also the served model
    strings and system fingerprints seen. A task counts once, by its first terminal record (a
    duplicate that two runs of one folder made before the run lock is not counted again: the
    terminal half of engine/results.final_mask, which every reader applies); `failed` lines are attempts a resume superseded or
    will retry: counted apart, never as answers."""
    lf = run.records.frame.select(list(CALL_SCHEMA))
    status = pl.col("status")
    answered = status.is_in(["ok", "parse_error", "refused"])
    lf = pl.concat(
        [lf.filter(status.is_in(TERMINAL)).filter(first_of_task()), lf.filter(status == "failed")]
    )
    per_experiment = (
        lf.group_by("modelKey", "experimentSlug")
        .agg(
            *_tallies(status, answered),
            served=pl.col("servedModel").drop_nulls().unique().sort(),
            fingerprints=pl.col("systemFingerprint").drop_nulls().unique().sort(),
        )
        .sort("modelKey", "experimentSlug")
    )
    per_model = lf.group_by("modelKey").agg(*_tallies(status, answered)).sort("modelKey")
    calls, models = pl.collect_all([per_experiment, per_model])
    return calls, models


def run_effects(run_dir: Path) -> RunEffects:
    from orchestrator.engine.lock import lock_state

    run = open_run(run_dir)
    return RunEffects(run, study_effects(run), *call_summary(run), holder=lock_state(run_dir))

"""The study's final answers as a lazy frame: what the analysis counts and the export writes.

Beside what every study reads, a record may say how its answer was chosen: `response.mode` is
"score" when the candidates were scored by log-likelihood (absent: "generate", the answer was
generated and parsed), and `response.scores` then holds one entry per candidate (its option
label, role, `logp` after the prompt, `premise` after "Answer:" alone, and `pmi` = logp -
premise, whose argmax is the choice).

One answer per item counts for a deterministic answer: a model at temperature 0, or any scored
answer (the argmax of fixed log-probabilities). Its repeated samples are one draw: counted as
many, they would shrink every interval by sqrt(samples) for nothing. The first sample stands.
"""

from __future__ import annotations

import polars as pl

from orchestrator.analysis.load import NO_ANSWER, Run
from orchestrator.engine.results import first_of_task

GENERATE, SCORE = "generate", "score"
CANDIDATE = pl.Struct(
    {
        "option": pl.String,
        "role": pl.String,
        "logp": pl.Float64,
        "premise": pl.Float64,
        "pmi": pl.Float64,
    }
)
SCHEMA = {
    "taskId": pl.String,
    "status": pl.String,
    "modelKey": pl.String,
    "job": pl.String,
    "experimentSlug": pl.String,
    "conditionIndex": pl.Int64,
    "variant": pl.String,
    "strategy": pl.String,
    "sample": pl.Int64,
    "response": pl.Struct(
        {"choice": pl.String, "role": pl.String, "mode": pl.String, "scores": pl.List(CANDIDATE)}
    ),
}
CELL = ["modelKey", "strategy", "job", "experimentSlug", "conditionIndex", "variant"]


def scan(run: Run, jobs: list[str], leave_out: tuple[str, ...] = tuple(NO_ANSWER)) -> pl.LazyFrame:
    """Every record of these jobs but those of the `leave_out` statuses (by default the final
    answers: ok, parse_error, refused), the response flattened to choice, role, mode and scores
    (the candidates; null in generation mode)."""
    lf = run.records.frame.select(list(SCHEMA))
    r = pl.col("response").struct
    # a task's final record is its first terminal one (engine/results.final_mask): a later
    # one is a duplicate that two runs of one folder made before the run lock
    terminal = lf.filter(pl.col("status") != "failed").filter(first_of_task())
    final = pl.concat([terminal, lf.filter(pl.col("status") == "failed")])
    return (
        final.filter(pl.col("job").is_in(jobs) & ~pl.col("status").is_in(leave_out))
        .with_columns(
            r.field("choice").alias("choice"),
            r.field("role").alias("role"),
            r.field("mode").fill_null(GENERATE).alias("mode"),
            r.field("scores").alias("scores"),
        )
        .drop("response")
    )


def answers(run: Run, kind: str) -> pl.LazyFrame:
    """The answers that count: every sample of a sampling model, one per item (its first
    sample) of a deterministic answer."""
    jobs = [j.id for j in run.jobs.values() if j.kind == kind]
    fixed = [k for k, deterministic in run.deterministic.items() if deterministic]
    once = pl.col("modelKey").is_in(fixed) | (pl.col("mode") == SCORE)
    lf = scan(run, jobs).drop("scores")
    return lf.filter(~once | (pl.col("sample") == pl.col("sample").min().over(CELL)))

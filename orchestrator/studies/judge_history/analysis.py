"""Outcomes of the judge-history study (seed 002), per model, as preregistered.

Unit of analysis: a task within a model, after averaging repetitions per condition. Primary
outcome per task: sign(prior - blind) * (anchor - blind). Models are reported separately and a
model's result is complete only when every task has the same number of valid judgments in all
three conditions; nothing is imputed.

Where the preregistered wording misleads, a plain version is computed beside it (see the
report's note): the gold-signed pull and anchor-vs-framing difference, whose signs do not come
from the noisy blind or framing mean they are measured from; correction harm over all tasks
rather than over a set chosen by the outcome; intervals that hold over 8 tasks (t for the mean,
order statistics for the median).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

from orchestrator.analysis.load import Run, final_records
from orchestrator.analysis.stats import ZERO, median_interval, t_interval, zero

CONDITION_NAMES = {0: "blind", 1: "framing", 2: "anchor"}
PASS_FROM = 4  # verdictRule: scores 4-5 are pass
TIE = 1e-9  # absolute errors of means of integers that differ by less are equal (float noise)


def items_table(run: Run) -> pl.DataFrame:
    rows = [
        {
            "job": job.id,
            "experimentSlug": e.slug,
            "gold": e.judged.gold_score,
            "prior": e.judged.prior_score,
        }
        for job in run.jobs.values()
        if job.kind == "judge-history"
        for e in job.experiments
    ]
    return pl.DataFrame(
        rows,
        schema={"job": pl.String, "experimentSlug": pl.String, "gold": pl.Int64, "prior": pl.Int64},
    )


def per_condition(run: Run, items: pl.DataFrame) -> pl.DataFrame:
    """Valid n, mean, SD, pass count and verdict/score disagreements per model x task x condition."""
    ok = pl.col("status") == "ok"
    return (
        final_records(run)
        .join(items.lazy().select("job", "experimentSlug"), on=["job", "experimentSlug"])
        .group_by("job", "modelKey", "experimentSlug", "conditionIndex")
        .agg(
            n_valid=ok.sum(),
            n_records=pl.len(),
            mean=pl.col("value").filter(ok).mean(),
            sd=pl.col("value").filter(ok).std(ddof=1),
            n_pass=(pl.col("choice") == "pass").filter(ok).sum(),
            n_inconsistent=((pl.col("value") >= 4) != (pl.col("choice") == "pass"))
            .filter(ok)
            .sum(),
        )
        .collect(engine="streaming")
    )


def _sign(x: pl.Expr) -> pl.Expr:
    return pl.when(x > 0).then(1.0).when(x < 0).then(-1.0).otherwise(0.0)


def _zero_value(x: float | None) -> float | None:
    """stats.zero of one summary value."""
    return 0.0 if x is not None and abs(x) < ZERO else x


def _signed(direction: pl.Expr, movement: pl.Expr) -> pl.Expr:
    """sign(direction) x movement; no movement is 0, not -0."""
    return zero(_sign(direction) * movement)


def task_outcomes(cond: pl.DataFrame, items: pl.DataFrame) -> pl.DataFrame:
    """One row per model x task with the three condition means side by side and every per-task
    outcome. `cond` has job, modelKey, experimentSlug, conditionIndex, n_valid, mean, sd, n_pass."""
    wide = None
    for index, name in CONDITION_NAMES.items():
        part = cond.filter(pl.col("conditionIndex") == index).select(
            "job",
            "modelKey",
            "experimentSlug",
            pl.col("n_valid").alias(f"n_{name}"),
            pl.col("mean").alias(name),
            pl.col("sd").alias(f"sd_{name}"),
            # none valid: no share (0/0 is NaN, and polars orders NaN above 0.5)
            pl.when(pl.col("n_valid") > 0)
            .then(pl.col("n_pass") / pl.col("n_valid"))
            .alias(f"pass_share_{name}"),
        )
        keys = ["job", "modelKey", "experimentSlug"]
        wide = part if wide is None else wide.join(part, on=keys, how="full", coalesce=True)
    wide = wide.join(items, on=["job", "experimentSlug"], how="left")
    majority = lambda c: (
        pl.when(pl.col(f"pass_share_{c}") > 0.5)
        .then(pl.lit("pass"))  # noqa: E731
        .when(pl.col(f"pass_share_{c}") < 0.5)
        .then(pl.lit("fail"))
    )
    of_mean = lambda c: (
        pl.when(pl.col(c) >= PASS_FROM)
        .then(pl.lit("pass"))  # noqa: E731
        .when(pl.col(c).is_not_null())
        .then(pl.lit("fail"))
    )
    return (
        wide.with_columns(
            pull=_signed(pl.col("prior") - pl.col("blind"), pl.col("anchor") - pl.col("blind")),
            pull_gold_signed=_signed(
                pl.col("prior") - pl.col("gold"), pl.col("anchor") - pl.col("blind")
            ),
            anchor_vs_framing=_signed(
                pl.col("prior") - pl.col("framing"), pl.col("anchor") - pl.col("framing")
            ),
            anchor_vs_framing_gold_signed=_signed(
                pl.col("prior") - pl.col("gold"), pl.col("anchor") - pl.col("framing")
            ),
            anchor_minus_framing=zero(pl.col("anchor") - pl.col("framing")),
            abs_error_blind=(pl.col("blind") - pl.col("gold")).abs(),
            abs_error_framing=(pl.col("framing") - pl.col("gold")).abs(),
            abs_error_anchor=(pl.col("anchor") - pl.col("gold")).abs(),
            verdict_blind=majority("blind"),
            verdict_anchor=majority("anchor"),
            # The published scorer's verdict: that of the task's mean score.
            verdict_blind_of_mean=of_mean("blind"),
            verdict_anchor_of_mean=of_mean("anchor"),
        )
        .with_columns(
            # Over every task with both means: is the anchored mean farther from gold than the blind
            # one (harm), nearer (help), or neither (a tie)?
            correction_harm=(pl.col("abs_error_anchor") - pl.col("abs_error_blind")) > TIE,
            correction_help=(pl.col("abs_error_anchor") - pl.col("abs_error_blind")) < -TIE,
            verdict_flip=pl.when(
                pl.col("verdict_blind").is_not_null() & pl.col("verdict_anchor").is_not_null()
            ).then(pl.col("verdict_blind") != pl.col("verdict_anchor")),
            verdict_flip_of_mean=pl.col("verdict_blind_of_mean")
            != pl.col("verdict_anchor_of_mean"),
        )
        .sort("job", "modelKey", "experimentSlug")
    )


def wilcoxon_p(values: np.ndarray) -> float:
    if len(values) == 0 or not np.any(values != 0):
        return float("nan")  # no movement at all: the test has nothing to rank
    return float(stats.wilcoxon(values, zero_method="wilcox").pvalue)


INTERVALS = (
    "mean",
    "mean_ci_low",
    "mean_ci_high",
    "median",
    "median_ci_low",
    "median_ci_high",
    "median_ci_level",
)


def intervals(values: np.ndarray) -> dict[str, np.ndarray | float]:
    """Over tasks (the last axis, vectorised over any others): the mean with its 95% t-interval,
    the median with its order-statistic interval and the level that interval reaches."""
    mean_low, mean_high = t_interval(values)
    median_low, median_high, level = median_interval(values)
    return dict(
        zip(
            INTERVALS,
            (
                np.mean(values, axis=-1),
                mean_low,
                mean_high,
                np.median(values, axis=-1),
                median_low,
                median_high,
                level,
            ),
            strict=True,
        )
    )


def location(values: np.ndarray, suffix: str = "") -> dict[str, float | None]:
    """`intervals` and the Wilcoxon signed-rank p of one per-task outcome of one model, named
    mean_pull<suffix>, mean_pull<suffix>_ci_low, ..., wilcoxon_p<suffix> (None: no task)."""
    found = intervals(values) if len(values) else dict.fromkeys(INTERVALS)
    named = {}
    for key, value in found.items():
        head, _, tail = key.partition("_")  # "mean_ci_low" -> mean_pull<suffix>_ci_low
        named[f"{head}_pull{suffix}{'_' if tail else ''}{tail}"] = (
            None if value is None else _zero_value(float(value))
        )
    return named | {f"wilcoxon_p{suffix}": wilcoxon_p(values)}


def _counts(part: pl.DataFrame) -> dict[str, int | float | None]:
    """Correction harm and verdict flips of one model, as counts over its tasks."""
    both = part.filter(pl.col("correction_harm").is_not_null())
    harm, helped = int(both["correction_harm"].sum()), int(both["correction_help"].sum())
    flips, by_mean = part["verdict_flip"].drop_nulls(), part["verdict_flip_of_mean"].drop_nulls()
    return {
        "correction_harm": harm,
        "correction_helped": helped,
        "correction_tied": both.height - harm - helped,
        "correction_tasks": both.height,
        "correction_harm_share": harm / both.height if both.height else None,
        "verdict_flips": int(flips.sum()),
        "verdict_flips_of": flips.len(),
        "verdict_flip_rate": by_mean.mean(),
        "verdict_flips_by_mean": int(by_mean.sum()),
        "verdict_flips_by_mean_of": by_mean.len(),
    }


def _incomplete(with_all: int, n_tasks: int, counts: pl.Series) -> str:
    """Why a model's result is not complete, in words a reader can act on."""
    if with_all < n_tasks:
        return f"{with_all}/{n_tasks} tasks have all three conditions"
    low = 0 if counts.len() < 3 * n_tasks else int(counts.min())
    return f"valid judgments per task and condition differ ({low}-{int(counts.max())})"


def model_summary(tasks: pl.DataFrame, cond: pl.DataFrame, n_tasks: int) -> pl.DataFrame:
    rows = []
    for (job, model_key), part in tasks.group_by(["job", "modelKey"], maintain_order=True):
        mine = cond.filter((pl.col("job") == job) & (pl.col("modelKey") == model_key))
        counts = mine["n_valid"]
        complete = (
            part.height == n_tasks
            and counts.len() == 3 * n_tasks
            and counts.n_unique() == 1
            and counts[0] > 0
        )
        pulls = part["pull"].drop_nulls().drop_nans().to_numpy()
        gold_signed = part["pull_gold_signed"].drop_nulls().drop_nans().to_numpy()
        rows.append(
            {
                "job": job,
                "modelKey": model_key,
                "complete": complete,
                "tasks_with_all_conditions": len(pulls),
                "tasks_planned": n_tasks,
                "judgments_per_condition": int(counts[0]) if complete else None,
                "incomplete": None if complete else _incomplete(len(pulls), n_tasks, counts),
                **location(pulls),
                **location(gold_signed, "_gold_signed"),
                "mean_anchor_vs_framing": _zero_value(part["anchor_vs_framing"].mean()),
                "mean_anchor_vs_framing_gold_signed": _zero_value(
                    part["anchor_vs_framing_gold_signed"].mean()
                ),
                "mean_anchor_minus_framing": _zero_value(part["anchor_minus_framing"].mean()),
                "abs_error_blind": part["abs_error_blind"].mean(),
                "abs_error_framing": part["abs_error_framing"].mean(),
                "abs_error_anchor": part["abs_error_anchor"].mean(),
                **_counts(part),
                "inconsistent_verdicts": int(mine["n_inconsistent"].sum()),
                "valid_judgments": int(mine["n_valid"].sum()),
                "mean_sd_blind": part["sd_blind"].mean(),
                "mean_sd_framing": part["sd_framing"].mean(),
                "mean_sd_anchor": part["sd_anchor"].mean(),
            }
        )
    return pl.DataFrame(rows)


def judge_outcomes(run: Run) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per model summary, per model x task outcomes); empty frames if the run has no such job."""
    items = items_table(run)
    if items.is_empty():
        return pl.DataFrame(), pl.DataFrame()
    cond = per_condition(run, items)
    if cond.is_empty():  # no final record yet (every call failed so far): nothing to judge
        return pl.DataFrame(), pl.DataFrame()
    tasks = task_outcomes(cond, items)
    summary = model_summary(tasks, cond, items.height)
    label = pl.col("modelKey").replace_strict(run.models, default=pl.col("modelKey")).alias("model")
    return summary.with_columns(label), tasks.with_columns(label)

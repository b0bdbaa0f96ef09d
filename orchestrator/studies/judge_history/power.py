"""Power of the judge-history study's test (seed 002): the Wilcoxon signed-rank test of the
per-task pulls, per job x model.

The headline is the mean over tasks of each task's pull, sign(prior - blind) x (anchor - blind),
from the task's mean score in each condition (analysis.py `task_outcomes`); the test is
scipy's two-sided Wilcoxon signed-rank test over those pulls (`wilcoxon_p`), at alpha with no
correction. The unit is the task: more tasks narrow the test; more repetitions only shrink the
noise within a task, not the tasks' own spread.

A task's pull varies as tau^2 (the tasks' true pulls spread around their mean) plus
sd^2 (1/reps + 1/reps) (the noise of the blind and anchor means of `reps` judgments with SD
sd). The Wilcoxon test is approximated by a t-test over tasks on K_eff - 1 degrees of freedom
with its error inflated by sqrt(pi/3) (the signed-rank test's asymptotic relative efficiency
to the t-test, 3/pi, for normal data), where K_eff = K x (1 - P0) counts the tasks whose pull
is not exactly 0: scores are whole points, so a pull lies on a lattice of step 1/reps, and the
test drops zero pulls (zero_method "wilcox"). P0 is the chance of a zero pull under a normal
pull of that SD rounded to the lattice, at the effect. At one judgment per condition (and at
temperature 0) every pull is a whole number of points: the nonzero ones tie in a few sizes and
the test's p-values come in coarse steps, so the critical value is that of the level the exact
test over K untied pulls can attain (0.039 at 8 tasks for 0.05; `attainable`). Checked against
the study's own test on simulated judges (tests/test_power_judge_history.py and 7 settings of
1-5 judgments per condition while writing it): the plain t with ARE 3/pi put the MDE up to
17% too low at 1-2 judgments; with the zero count it is within 5% at 2-5 (on the high side at
3-5), and with the attainable level within 1% at 1.

Its exact p-value cannot go below 2 / 2^K (every task pulled the same way), so with 5 tasks or
fewer nothing reaches 0.05 (`min_p`), whatever the repetitions. At 8 tasks its real level is
well below alpha: zero pulls drop out and tied whole-point pulls leave few attainable p-values
(0-3% false positives at alpha 0.05 in the simulations): the approximation above is fitted
to its power, not its level.

A deterministic model (temperature 0) repeats one judgment: the test still runs over tasks,
but a task's noise is one draw per condition whatever the repetitions, so only more tasks
lower the MDE.

Defaults without a pilot: a judgment's SD a quarter of the score scale (1 point on 1-5) and the
tasks' true pulls spreading with SD 0.5 point (half a scale step). A pilot gives the pooled SD
of judgments within a task and condition (blind and anchor) and the spread of its tasks' pulls
net of that noise (analysis/power.py `spread_of_effects`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from scipy import stats

from orchestrator.analysis.power import Planned, Precision, spread_of_effects

TEST = "Wilcoxon signed-rank over pulls"
DEFAULT_TAU = 0.5  # points: the tasks' true pulls spread by half a scale step


@dataclass(frozen=True)
class Spread:
    """What the MDE needs: a judgment's SD within a task and condition, and the SD of the
    tasks' true pulls around their mean."""

    sd: float
    tau: float


@lru_cache(maxsize=64)
def attainable(tasks: int, alpha: float) -> float:
    """The largest two-sided level at most alpha that the exact signed-rank test over `tasks`
    untied pulls can attain (0.039 at 8 tasks for alpha 0.05; 0 at 5 or fewer). Beyond 30
    tasks the steps are fine: alpha."""
    if tasks > 30:
        return alpha
    counts = [1]  # ways to reach each rank sum
    for rank in range(1, tasks + 1):
        counts = [
            (counts[s] if s < len(counts) else 0) + (counts[s - rank] if s >= rank else 0)
            for s in range(len(counts) + rank)
        ]
    total, below, best = 2**tasks, 0, 0.0
    for ways in counts:
        below += ways
        if 2 * below / total > alpha:
            break
        best = 2 * below / total
    return best


def pull_design(tasks: int, spread: Spread, deterministic: bool = False, alpha: float = 0.05):
    """The Wilcoxon test over `tasks` pulls at `samples` judgments per condition (one draw at
    temperature 0, whatever the samples), held to `alpha`."""
    stretch = math.sqrt(math.pi / 3)
    min_p = 2 / 2**tasks
    coarse = attainable(tasks, alpha)  # the level whole-point pulls leave it

    def design(samples: int, effect: float) -> Precision:
        draws = 1 if deterministic else max(samples, 1)
        sd = math.sqrt(spread.tau**2 + 2 * spread.sd**2 / draws)  # one task's pull
        if sd == 0:
            return Precision(0.0, 0.0, df=max(tasks - 1, 1), min_p=min_p)
        step = 1 / draws  # pulls of whole-point scores: multiples of 1/draws
        zero = stats.norm.cdf((step / 2 - effect) / sd) - stats.norm.cdf((-step / 2 - effect) / sd)
        counted = max(tasks * (1 - zero), 1.5)
        df = counted - 1
        se = sd / math.sqrt(counted) * stretch
        if draws > 1 or coarse <= 0:
            return Precision(se, se, df=df, min_p=min_p)
        # whole-point pulls: the critical value of the attainable level, carried by se_test
        widen = stats.t.ppf(1 - coarse / 2, df) / stats.t.ppf(1 - alpha / 2, df)
        return Precision(se * widen, se, df=df, min_p=min_p)

    return design


def _scale(experiment) -> tuple[float, str]:
    contract = experiment.conditions[0].variants[0].contract
    low, high = contract.minimum, contract.maximum
    if low is None or high is None:
        return 1.0, "points"
    return (high - low) / 4, f"points on {low:g}-{high:g}"


def pilot_spread(cond, tasks) -> tuple[Spread, str] | None:
    """A model's (or several models') judgments: `cond` as analysis.py `per_condition` gives
    it (n_valid, sd per task x condition), `tasks` as `task_outcomes` (the pull per task).
    None when fewer than two tasks have a pull."""
    import numpy as np
    import polars as pl

    pulls = tasks["pull"].drop_nulls().drop_nans().to_numpy()
    if len(pulls) < 2:
        return None
    cells = cond.filter(pl.col("conditionIndex").is_in([0, 2]) & (pl.col("n_valid") >= 2))
    cells = cells.filter(pl.col("sd").is_not_null())
    if cells.height:
        dof = (cells["n_valid"] - 1).to_numpy()
        sd = float(np.sqrt((dof * cells["sd"].to_numpy() ** 2).sum() / dof.sum()))
        counts = cond.filter(pl.col("conditionIndex").is_in([0, 2]))["n_valid"].to_numpy()
        per_task = float(np.mean(2 / np.maximum(counts, 1)))  # 1/n_blind + 1/n_anchor
        said = f"judgment SD {sd:.3g}"
    else:  # one judgment per condition: the noise cannot be told from the tasks' spread
        sd, per_task = 1.0, 2.0
        said = "judgment SD 1 (default: the pilot has one judgment per condition)"
    tau = math.sqrt(spread_of_effects(pulls, sd**2 * per_task))
    return Spread(sd, tau), f"{said}, tasks' pull SD {tau:.3g} net of it, {len(pulls)} tasks"


def _pilot(pilot):
    """(per-condition cells, per-task outcomes) of the pilot's judge-history jobs, or None."""
    if pilot is None or not any(job.kind == "judge-history" for job in pilot.jobs.values()):
        return None
    from orchestrator.studies.judge_history.analysis import (
        items_table,
        per_condition,
        task_outcomes,
    )

    items = items_table(pilot)
    cond = per_condition(pilot, items)
    if cond.is_empty():
        return None
    return cond, task_outcomes(cond, items)


def _measured(found, job: str, slugs: tuple[str, ...], model_key: str, name: str):
    """The pilot's spread for this job's tasks on this model, else on all its models."""
    import polars as pl

    cond, tasks = found
    mine = pl.col("experimentSlug").is_in(list(slugs))
    if not tasks.filter(pl.col("job") == job).is_empty():
        mine &= pl.col("job") == job
    cond, tasks = cond.filter(mine), tasks.filter(mine)
    same = pl.col("modelKey") == model_key
    for c, t, other in ((cond.filter(same), tasks.filter(same), False), (cond, tasks, True)):
        measured = pilot_spread(c, t) if t.height else None
        if measured:
            text = f"pilot {name}: " + measured[1]
            if other:
                text += " (models pooled: this one is not in the pilot)"
            return measured[0], text
    return None


def power(plan, pilot, alpha: float) -> list[Planned]:
    slugs: dict[tuple, dict[str, object]] = {}
    samples: dict[tuple, int] = {}
    found: dict[tuple, Any] = {}
    for cell in plan.cells:
        if cell.job.kind != "judge-history":
            continue
        key = (cell.job.id, cell.model_key)
        slugs.setdefault(key, {})[cell.experiment.slug] = cell.experiment
        samples[key] = min(samples.get(key, cell.samples), cell.samples)
        found[key] = cell.model
    measured_from = _pilot(pilot)
    rows = []
    for key, model in found.items():
        job, model_key = key
        experiments = slugs[key]
        tasks = len(experiments)
        sd, scale = _scale(next(iter(experiments.values())))
        spread, variance = (
            Spread(sd, DEFAULT_TAU),
            f"default: judgment SD {sd:g} (a quarter of the scale), tasks' pull SD "
            f"{DEFAULT_TAU:g} point",
        )
        if measured_from is not None:
            measured = _measured(measured_from, job, tuple(experiments), model_key, pilot.path.name)
            if measured:
                spread, variance = measured
        note = ""
        if model.deterministic:
            note = (
                "T=0: repeated judgments are one draw, so a task's pull keeps one draw's noise "
                "whatever the repetitions; the test still runs over tasks, and only more tasks help"
            )
            if 2 / 2**tasks > alpha:
                note += (
                    f"; with {tasks} tasks its smallest possible p, {2 / 2**tasks:.3g}, is "
                    f"above {alpha:g} anyway"
                )
        rows.append(
            Planned(
                study="judge-history",
                job=job,
                experiment="all tasks",
                model=model_key,
                measure="mean prior-score pull",
                scale=scale,
                test=TEST,
                unit="tasks",
                units=tasks,
                samples=samples[key],
                alpha=alpha,
                correction="",
                design=pull_design(tasks, spread, model.deterministic, alpha),
                variance=variance,
                note=note,
                experiments=tuple(experiments),
            )
        )
    return rows

"""Power planning for the judge-history study (its power.py): the Wilcoxon test of the
per-task pulls, per job x model, planned on the shipped job, its defaults, the 2/2^K floor,
deterministic models, pilot estimation, and (slow) a simulation through the study's own
task_outcomes and model_summary at the reported MDE."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import optimize, stats

from orchestrator.analysis.load import open_run
from orchestrator.analysis.power import Target, assess, mde
from orchestrator.cli.power import notes
from orchestrator.cli.run import load_target
from orchestrator.plan import Plan
from orchestrator.studies.judge_history.analysis import model_summary, task_outcomes
from orchestrator.studies.judge_history.power import Spread, pilot_spread, power, pull_design
from orchestrator.studies.power import power_rows
from tests.conftest import ROOT, run_quietly, write_config
from tests.test_judge_history_stats import GOLD, JOB, PRIOR

CONFIG = ROOT / "configs" / "judge-history-local.toml"


def _plan(config=CONFIG, samples=None, limit=None):
    return Plan(load_target(config, samples, None, None, limit, None))


def _cold(tmp_path):
    return write_config(
        tmp_path,
        """
        name = "cold"
        jobs = ["judge-history"]
        samples = 3
        [[models]]
        provider = "simulated"
        name = "cold"
        temperature = 0
        """,
    )


def _hand_mde(tasks, sd, tau, draws, alpha=0.05):
    """The design by hand: t over the tasks with a nonzero pull, error x sqrt(pi/3); at one
    judgment the critical value of the exact test's attainable level (0.039 at 8 tasks)."""
    sigma = math.sqrt(tau**2 + 2 * sd**2 / draws)
    level = 2 * 5 / 2**8 if (draws, tasks) == (1, 8) else alpha  # P(rank sum <= 3) = 5/256
    e = 1.0
    for _ in range(200):
        zero = stats.norm.cdf((0.5 / draws - e) / sigma) - stats.norm.cdf(
            (-0.5 / draws - e) / sigma
        )
        k = tasks * (1 - zero)
        e = (
            (stats.t.ppf(1 - level / 2, k - 1) + stats.t.ppf(0.8, k - 1))
            * sigma
            / math.sqrt(k)
            * math.sqrt(math.pi / 3)
        )
    return e


def test_the_shipped_job_is_one_test_per_model_over_its_eight_tasks():
    [row] = power(_plan(), None, 0.05)
    assert (row.study, row.experiment, row.unit, row.units, row.samples) == (
        "judge-history",
        "all tasks",
        "tasks",
        8,
        3,
    )
    assert row.alpha == 0.05 and row.correction == "" and row.scale == "points on 1-5"
    assert set(row.experiments) == {e.slug for e in JOB.experiments}
    assert row.variance.startswith("default: judgment SD 1 ")
    found = mde(row.design, 3, 0.05, 0.8)
    assert found == pytest.approx(_hand_mde(8, 1.0, 0.5, 3), rel=1e-6)
    assert row.design(3, 0.0).min_p == 2 / 2**8
    figures = assess(row, Target())
    assert figures["more_samples_help"] and figures["floor"] < found


def test_the_test_takes_every_tasks_calls():
    plan = _plan()
    [row] = power_rows(plan, None, Target(mde=1.5))
    planned_calls = sum(c.samples * c.calls_per_task for c in plan.cells)
    needed = row["samples_needed"]
    assert needed is not None and needed < 3  # 1.5 points: fewer repetitions would do
    assert row["calls_needed"] == round(planned_calls / 3 * needed)


def test_five_tasks_cannot_reach_alpha_whatever_the_repetitions():
    [row] = power(_plan(limit=5), None, 0.05)
    assert row.units == 5
    figures = assess(row, Target())
    assert figures["mde"] is None and figures["min_p"] == 2 / 2**5 > 0.05
    said = notes([{**row.__dict__, **figures, "model_label": row.model}], None)
    assert any("cannot reach p < 0.05" in s and "only more tasks help" in s for s in said)
    [six] = power(_plan(limit=6), None, 0.05)
    assert mde(six.design, 3, 0.05, 0.8) is not None  # 2/64 = 0.031


def test_a_deterministic_judge_gains_nothing_from_repetitions(tmp_path):
    [row] = power(_plan(_cold(tmp_path)), None, 0.05)
    assert row.note.startswith("T=0") and "only more tasks" in row.note
    figures = assess(row, Target())
    assert figures["mde"] == figures["floor"] and not figures["more_samples_help"]
    assert figures["mde"] == pytest.approx(_hand_mde(8, 1.0, 0.5, 1), rel=1e-6)


def test_whole_point_pulls_count_the_zero_pulls_the_test_drops():
    one = pull_design(8, Spread(1.0, 0.5))
    # at one judgment a condition a pull is 0 often (P0 about 0.3 at no effect): fewer tasks count
    assert one(1, 0.0).df < one(1, 1.5).df < 7 and one(10**6, 0.0).df == pytest.approx(7)
    assert pull_design(8, Spread(0.0, 0.0))(3, 0.0).se_test == 0  # nothing varies: no test


def _cond(rng, tasks: int, sd: float, tau: float, reps: int, models=("m",)):
    """per_condition-shaped cells of continuous scores: task level ~ N(3, 0.5^2) shared by
    both conditions, the task's pull 0.4 + N(0, tau^2), judgments N(level, sd^2)."""
    frames = []
    for model in models:
        level = rng.normal(3, 0.5, tasks)
        pull = 0.4 + rng.normal(0, tau, tasks)
        for index, mean in ((0, level), (1, level), (2, level + pull)):
            s = rng.normal(mean, sd, (reps, tasks))
            frames.append(
                pl.DataFrame(
                    {
                        "job": "j",
                        "modelKey": model,
                        "experimentSlug": [f"t{i}" for i in range(tasks)],
                        "conditionIndex": index,
                        "n_valid": reps,
                        "mean": s.mean(axis=0),
                        "sd": s.std(axis=0, ddof=1) if reps > 1 else np.nan,
                        "n_pass": 0,
                        "n_inconsistent": 0,
                    }
                )
            )
    items = pl.DataFrame(
        {"job": "j", "experimentSlug": [f"t{i}" for i in range(tasks)], "gold": 3, "prior": 5}
    )
    cond = pl.concat(frames)
    return cond, task_outcomes(cond, items)


def test_pilot_recovers_the_judgment_sd_and_the_tasks_spread():
    cond, tasks = _cond(np.random.default_rng(5), 600, sd=0.7, tau=0.4, reps=3)
    spread, said = pilot_spread(cond, tasks)
    assert spread.sd == pytest.approx(0.7, rel=0.04)
    assert spread.tau == pytest.approx(0.4, abs=0.04)
    assert "600 tasks" in said
    one = _cond(np.random.default_rng(6), 600, sd=0.7, tau=0.4, reps=1)
    spread, said = pilot_spread(*one)  # one judgment: the noise is the default's, said so
    assert spread.sd == 1.0 and "default" in said


def test_a_pilot_run_gives_the_variances(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "pilot"
        jobs = ["judge-history"]
        samples = 3
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "judge"
        [models.simulate.judge]
        pull = 0.3
        sd = 0.6
        """,
    )
    pilot = open_run(run_quietly(cfg).run_dir)
    [row] = power(_plan(cfg), pilot, 0.05)
    assert row.variance.startswith(f"pilot {pilot.path.name}: judgment SD ")
    [other] = power(_plan(), pilot, 0.05)  # the local model is not in the pilot: pooled
    assert "models pooled" in other.variance


# The simulation: the seed's 8 tasks judged by an item-clustered respondent. A task's blind
# level is gold + N(0, 0.5^2), shared by its three conditions; under history-anchor it moves
# towards the prior by the planted pull plus the task's own N(0, 0.5^2); judgments are
# round(N(level, 1)) clipped to 1-5, 3 per condition (at T=0 one, repeated 3 times). The
# design is fed the respondent's own figures on the pull's scale, worked out exactly from its
# score distributions over a fixed population of tasks (not from the simulated judgments):
# the judgments' noise within a task and the spread of the tasks' expected pulls.
SEEDS = 400
LEVEL_SD, PULL_SD, JUDGMENT_SD, REPS = 0.5, 0.5, 1.0, 3
TOWARD = np.sign(PRIOR - GOLD)


def _mean_pmf(mean: np.ndarray, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's distribution of the mean of `draws` judgments: (values, probabilities)."""
    cdf = stats.norm.cdf((np.arange(1.5, 5, 1.0)[None, :] - mean[:, None]) / JUDGMENT_SD)
    one = np.diff(np.hstack([np.zeros((len(mean), 1)), cdf, np.ones((len(mean), 1))]), axis=1)
    total = np.ones((len(mean), 1))
    for _ in range(draws):
        total = np.stack([np.convolve(t, o) for t, o in zip(total, one, strict=True)])
    return np.arange(draws, 5 * draws + 1) / draws, total


def _truth(pull: float, draws: int, population: int = 3000) -> tuple[float, float, float]:
    """(expected mean pull, a task's pull variance within it, the variance of tasks' expected
    pulls) of the respondent, exactly per task over a fixed population of tasks."""
    rng = np.random.default_rng(99)
    task = rng.integers(0, len(GOLD), population)
    blind = GOLD[task] + rng.normal(0, LEVEL_SD, population)
    anchor = blind + TOWARD[task] * (pull + rng.normal(0, PULL_SD, population))
    values, p_blind = _mean_pmf(blind, draws)
    _, p_anchor = _mean_pmf(anchor, draws)
    sign = np.sign(PRIOR[task][:, None, None] - values[None, :, None])
    pulls = sign * (values[None, None, :] - values[None, :, None])
    weight = p_blind[:, :, None] * p_anchor[:, None, :]
    mean = (pulls * weight).sum(axis=(1, 2))
    within = (pulls**2 * weight).sum(axis=(1, 2)) - mean**2
    return float(mean.mean()), float(within.mean()), float(mean.var())


def _design_at(pull: float, deterministic: bool):
    draws = 1 if deterministic else REPS
    _, within, spread = _truth(pull, draws)
    sd = math.sqrt(within * draws / 2)  # within = 2 sd^2 / draws
    return pull_design(len(GOLD), Spread(sd, math.sqrt(spread)), deterministic)


def _planted(deterministic: bool) -> tuple[float, float]:
    """(the latent pull whose expected mean pull is the MDE the design reports, that MDE)."""
    gap = lambda d: (
        _truth(d, 1 if deterministic else REPS)[0]
        - mde(  # noqa: E731
            _design_at(d, deterministic), REPS, 0.05, 0.8
        )
    )
    latent = optimize.brentq(gap, 0.2, 4.0, xtol=1e-4)
    return latent, _truth(latent, 1 if deterministic else REPS)[0]


def _summaries(pull: float, pull_sd: float, deterministic: bool, seed: int) -> pl.DataFrame:
    """The study's own task_outcomes and model_summary over SEEDS replications (one model each)."""
    rng = np.random.default_rng(seed)
    k = len(GOLD)
    blind = GOLD + rng.normal(0, LEVEL_SD, (SEEDS, 1, k))
    anchor = blind + TOWARD * (pull + rng.normal(0, pull_sd, (SEEDS, 1, k)))
    frames = []
    for index, mean in ((0, blind), (1, blind), (2, anchor)):
        noise = rng.normal(0, JUDGMENT_SD, (SEEDS, 1 if deterministic else REPS, k))
        scores = np.broadcast_to(np.clip(np.rint(mean + noise), 1, 5), (SEEDS, REPS, k))
        frames.append(
            pl.DataFrame(
                {
                    "job": "j",
                    "modelKey": np.repeat([f"m{r:04d}" for r in range(SEEDS)], k),
                    "experimentSlug": np.tile([f"t{i}" for i in range(k)], SEEDS),
                    "conditionIndex": index,
                    "n_valid": REPS,
                    "mean": scores.mean(axis=1).ravel(),
                    "sd": scores.std(axis=1, ddof=1).ravel(),
                    "n_pass": (scores >= 4).sum(axis=1).ravel(),
                    "n_inconsistent": 0,
                }
            )
        )
    items = pl.DataFrame(
        {"job": "j", "experimentSlug": [f"t{i}" for i in range(k)], "gold": GOLD, "prior": PRIOR}
    )
    cond = pl.concat(frames)
    return model_summary(task_outcomes(cond, items), cond, k)


@pytest.mark.slow
@pytest.mark.parametrize("deterministic", [False, True], ids=["T=0.7", "T=0"])
def test_a_pull_at_the_reported_mde_is_found_80_percent_of_the_time(deterministic):
    latent, effect = _planted(deterministic)
    summary = _summaries(latent, PULL_SD, deterministic, seed=31)
    found = (summary["wilcoxon_p"].fill_nan(1).fill_null(1) < 0.05) & (summary["mean_pull"] > 0)
    rate = float(found.mean())
    print(
        f"judge-history 8 tasks x {REPS} reps{' (T=0)' if deterministic else ''}: MDE "
        f"{effect:.3f} points (latent pull {latent:.2f}), detected {rate:.3f} over "
        f"{summary.height} seeds"
    )
    assert summary.height == SEEDS and 0.74 <= rate <= 0.86


@pytest.mark.slow
@pytest.mark.parametrize("deterministic", [False, True], ids=["T=0.7", "T=0"])
def test_with_no_pull_the_test_calls_at_most_alpha(deterministic):
    """No pull at all (tasks still differ in level): the Wilcoxon test over 8 tasks stays
    below alpha. Well below: zero pulls drop out and tied whole-point pulls leave few
    attainable p-values, so its real level is a fraction of alpha (power.py says so)."""
    summary = _summaries(0.0, 0.0, deterministic, seed=32)
    rate = float((summary["wilcoxon_p"].fill_nan(1).fill_null(1) < 0.05).mean())
    print(
        f"judge-history null{' (T=0)' if deterministic else ''}: called {rate:.3f} over "
        f"{summary.height} seeds"
    )
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / SEEDS)

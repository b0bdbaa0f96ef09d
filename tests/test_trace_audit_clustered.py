"""The trace audit's intervals and tests take the item, not the trace, as their unit (issue 45,
item 2). Every sample and option order of a run's item is a trace of its own, and at T=0 those
traces are one text: Welch over traces took 10 items x 5 samples for 50 independent draws and
called a condition effect that is not there in 13-32% of simulated runs. The by-condition test
is now over items (the paired t where every item is in both conditions), the score means' t-
intervals are over item means and the rates' Wilson intervals are on an effective n.

On the previous code (checked in a worktree of 72b3896): by_condition's p was Welch's over
traces, and its null rate was 0.17, 0.34 and 0.13 in the three settings of
test_the_by_condition_test_holds_its_level_under_the_items_null (asserted <= 0.065), its p not
the paired t's (test_the_by_condition_p_is_the_paired_t_over_item_means); the score interval
over traces covered 49% (test_the_score_mean_interval_covers_the_mean_over_items) and the
rates' Wilson interval was over traces
(test_a_rate_over_repeated_traces_has_the_interval_of_its_items); the caption said Welch. The
planted-effect and CR2-identity tests pass on both.
"""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest
from scipy import stats

from orchestrator.analysis.stats import t_interval, welch, wilson
from orchestrator.studies.trace_audit.analysis import by_condition, dispositions, scores
from orchestrator.studies.trace_audit.records import SCHEMA
from orchestrator.studies.trace_audit.report import CONDITION_NOTE, NOTE, _condition_rows

# The settings: (items, samples per item and condition, judge noise sd)
SETTINGS = ((10, 5, 0.0), (40, 10, 0.0), (10, 5, 0.5))


def frame_of(columns: dict[str, object], rows: int) -> pl.DataFrame:
    """A frame in the reader's SCHEMA: the given columns, the rest null (a column SCHEMA lacks
    is kept as text: the previous code's SCHEMA had no source_item, and its analysis ran on
    these frames all the same)."""
    schema = SCHEMA | {name: pl.String for name in columns if name not in SCHEMA}
    data = {
        name: (
            pl.Series(name, columns[name], dtype=dtype)
            if name in columns and isinstance(columns[name], (list, np.ndarray, pl.Series))
            else pl.repeat(columns.get(name), rows, dtype=dtype, eager=True).alias(name)
        )
        for name, dtype in schema.items()
    }
    return pl.DataFrame(data)


def simulate(
    items: int,
    samples: int,
    noise: float,
    reps: int,
    rng: np.random.Generator,
    effect: float = 0.0,
) -> pl.DataFrame:
    """`reps` simulated audits of a two-condition run, each its own experiment, as the reader's
    frame: a latent score 3 + item effect (sd 1) + item x condition effect (sd 0.7) + `effect`
    in the last condition + judge noise (sd `noise`, per trace: 0 is a T=0 source whose samples
    are one trace), rounded and clipped to the judge's 1-5 scale. The noise is drawn on its
    own, from nothing the test checks against."""
    shape = (reps, items, 2, samples)
    latent = (
        3.0
        + rng.normal(0, 1, (reps, items, 1, 1))
        + rng.normal(0, 0.7, (reps, items, 2, 1))
        + effect * np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
        + rng.normal(0, noise, shape)
    )
    score = np.clip(np.round(latent), 1, 5).astype(np.int64).ravel()
    rep, item, cond, sample = (a.ravel() for a in np.indices(shape))
    ids = pl.DataFrame({"rep": rep, "item": item, "cond": cond, "sample": sample}).select(
        experiment=pl.format("e{}", "rep"),
        item=pl.format("i{}", "item"),
        task=pl.format("e{}i{}c{}s{}", "rep", "item", "cond", "sample"),
        # a T=0 source repeats one trace; with judge noise the traces differ
        text=pl.format("i{}c{}s{}", "item", "cond", "sample")
        if noise
        else pl.format("i{}c{}", "item", "cond"),
    )
    return frame_of(
        {
            "task_id": ids["task"],
            "trace_id": ids["task"],
            "model_key": "k",
            "model": "judge",
            "status": "ok",
            "disposition": "passed",
            "bias": "Anchoring",
            "judge_score": score,
            "source_experiment": ids["experiment"],
            "source_condition": cond,
            "source_condition_label": np.where(cond == 0, "control", "anchored"),
            "source_strategy": "cot",
            "source_model": "m",
            "source_item": ids["item"],
            "trace_digest": ids["text"],
        },
        score.size,
    )


def welch_over_traces(frame: pl.DataFrame) -> np.ndarray:
    """The previous code's p per experiment: Welch over traces, last condition minus first."""
    per = frame.group_by("source_experiment", "source_condition").agg(
        m=pl.col("judge_score").mean(), v=pl.col("judge_score").var(), n=pl.len()
    )
    a = per.filter(pl.col("source_condition") == 1).sort("source_experiment")
    b = per.filter(pl.col("source_condition") == 0).sort("source_experiment")
    return welch(a["m"], a["v"], a["n"], b["m"], b["v"], b["n"])[3]


def null_rates(items: int, samples: int, noise: float, reps: int, seed: int) -> dict:
    """By-condition's and Welch-over-traces' rates of p < .05 over `reps` simulated null runs
    (in chunks of 1,000, to keep the frames small); an untestable row (no variance) is no
    finding."""
    rng, new, old, untestable = np.random.default_rng(seed), [], [], 0
    for done in range(0, reps, 1000):
        frame = simulate(items, samples, noise, min(1000, reps - done), rng)
        table = by_condition(frame)
        assert table.height == min(1000, reps - done)
        new.append(table["p"].fill_null(1.0).to_numpy())
        old.append(np.nan_to_num(welch_over_traces(frame), nan=1.0))
        untestable += table["p"].null_count()
    new_p, old_p = np.concatenate(new), np.concatenate(old)
    assert len(new_p) == len(old_p) == reps
    return {
        "setting": f"{items} items x {samples} samples, judge noise {noise}",
        "welch_over_traces": float((old_p < 0.05).mean()),
        "paired_t_over_items": float((new_p < 0.05).mean()),
        "untestable": untestable / reps,
        "replications": reps,
    }


@pytest.mark.parametrize("items, samples, noise", SETTINGS)
def test_the_by_condition_test_holds_its_level_under_the_items_null(items, samples, noise):
    """2,000 simulated runs per setting (SE 0.5% at 5%): the test over items stays near 5% where
    Welch over the same traces called 13-32% of them significant."""
    got = null_rates(items, samples, noise, 2000, seed=items * 100 + samples + int(10 * noise))
    assert got["paired_t_over_items"] <= 0.065, got
    assert got["welch_over_traces"] >= 0.12, got  # the simulation sees the old failure


@pytest.mark.slow
def test_the_null_rate_table(capsys):
    """The table of issue 45, item 2: 10,000 simulated runs per setting (binomial SE at 5%:
    0.22%). Printed for docs/statistics.md (run with -s)."""
    start, rows = time.perf_counter(), []
    for i, setting in enumerate(SETTINGS):
        rows.append(null_rates(*setting, 10_000, seed=4500 + i))
    with capsys.disabled():
        print("\n| setting | Welch over traces | paired t over items | untestable | replications |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['setting']} | {100 * r['welch_over_traces']:.1f}% | "
                f"{100 * r['paired_t_over_items']:.1f}% | {100 * r['untestable']:.2f}% | "
                f"{r['replications']:,} |"
            )
        print(f"({time.perf_counter() - start:.1f} s)")
    for row in rows:
        assert abs(row["paired_t_over_items"] - 0.05) < 0.008, row
        assert row["welch_over_traces"] >= 0.12, row


def test_a_planted_condition_effect_is_found():
    """One latent scale point lower in the anchored condition, 20 items x 5 samples with judge
    noise: found (p < .05, negative) in most runs, and the difference is on average what
    rounding and clipping to 1-5 leave of it (computed from a million draws)."""
    rng = np.random.default_rng(7)
    table = by_condition(simulate(20, 5, 0.5, 200, rng, effect=-1.0))
    found = ((table["p"].fill_null(1.0) < 0.05) & (table["difference"] < 0)).mean()
    assert found >= 0.85, found
    latent = 3 + rng.normal(0, 1, 10**6) + rng.normal(0, 0.7, 10**6) + rng.normal(0, 0.5, 10**6)
    truth = np.mean(np.clip(np.round(latent - 1), 1, 5) - np.clip(np.round(latent), 1, 5))
    assert table["difference"].mean() == pytest.approx(truth, abs=0.06)


def known() -> pl.DataFrame:
    """6 items x 3 samples per condition, the samples different, some cells alike."""
    rng = np.random.default_rng(11)
    return simulate(6, 3, 0.8, 1, rng, effect=-0.7)


def test_the_by_condition_p_is_the_paired_t_over_item_means():
    frame = known()
    got = by_condition(frame).row(0, named=True)
    means = (
        frame.group_by("source_item", "source_condition")
        .agg(pl.col("judge_score").mean())
        .sort("source_item", "source_condition")
    )
    control = means.filter(pl.col("source_condition") == 0)["judge_score"].to_numpy()
    anchored = means.filter(pl.col("source_condition") == 1)["judge_score"].to_numpy()
    ref = stats.ttest_rel(anchored, control)
    assert got["difference"] == pytest.approx((anchored - control).mean())
    assert got["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert (got["ci_low"], got["ci_high"]) == pytest.approx(ref.confidence_interval(), rel=1e-9)
    assert got["df"] == pytest.approx(5)
    assert got["method"] == "paired t" and got["items"] == got["paired_items"] == 6
    assert got["traces"] == 36


def test_items_in_one_condition_only_are_kept_by_cr2():
    """An items sample that put two items in the control condition only: they are kept (CR2 by
    item), and the interval is wider than the paired t's over the four in both."""
    frame = simulate(6, 3, 0.5, 1, np.random.default_rng(5))
    lone = pl.col("source_item").is_in(["i4", "i5"]) & (pl.col("source_condition") == 1)
    got = by_condition(frame.filter(~lone)).row(0, named=True)
    assert got["method"] == "CR2 by item" and (got["items"], got["paired_items"]) == (6, 4)
    assert got["ci_low"] < got["difference"] < got["ci_high"] and 0 < got["p"] < 1
    row = _condition_rows(by_condition(frame.filter(~lone)))[0]
    assert row["test"] == "CR2 by item over 6 items (4 in both)"


def test_a_deterministic_source_counts_each_item_once_and_says_so():
    frame = simulate(10, 5, 0.0, 1, np.random.default_rng(3))
    got = by_condition(frame).row(0, named=True)
    one = by_condition(frame.filter(pl.col("task_id").str.ends_with("0"))).row(0, named=True)
    # five identical traces of an item are one: the test is that over one trace per item
    assert (got["p"], got["ci_low"]) == pytest.approx((one["p"], one["ci_low"]))
    assert got["identical_cells"] == got["repeated_cells"] == 20
    row = _condition_rows(by_condition(frame))[0]
    assert row["test"] == "paired t over 10 items"
    assert "10 items, 100 traces" in row["units"] and "deterministic source" in row["units"]
    assert (
        "control: " in row["mean score per condition"]
        and "10 items, 50 traces" in (row["mean score per condition"])
    )


def test_an_experiment_of_one_item_says_it_has_no_test():
    """Review of issue 45: one item gave "paired t over 1 items" beside a p of "-"."""
    frame = simulate(1, 3, 0.5, 1, np.random.default_rng(5))
    got = by_condition(frame).row(0, named=True)
    assert got["items"] == 1 and (got["p"] is None or np.isnan(got["p"]))
    assert _condition_rows(by_condition(frame))[0]["test"] == "one item: no test"


def test_the_caption_names_the_test_over_items():
    note = " ".join(CONDITION_NOTE.split())
    assert "Welch" not in note and "paired t over the items" in note
    assert "t-intervals over items" in " ".join(NOTE.split())


def test_traces_of_unknown_items_count_as_items_and_the_table_says_so():
    """An older audit whose source run is gone: its traces name no item, and each is one."""
    frame = simulate(4, 3, 0.5, 1, np.random.default_rng(1)).with_columns(
        source_item=pl.lit(None, pl.String)
    )
    got = by_condition(frame).row(0, named=True)
    assert (got["items"], got["traces"], got["unknown_items"]) == (24, 24, 24)
    assert got["method"] == "CR2 by item" and got["paired_items"] == 0
    assert (
        "24 traces of unknown items, each counted as one"
        in _condition_rows(by_condition(frame))[0]["units"]
    )


def test_cr2_by_item_is_the_paired_t_where_every_item_is_in_both():
    """Why one method serves both designs: CR2 of the two means over items that are all in
    both conditions gives the paired t's variance and df (the code takes the closed form)."""
    from orchestrator.analysis.cr2 import cr2_cells

    rng = np.random.default_rng(4)
    a = rng.normal(3, 1, 9)
    b = a + rng.normal(-0.4, 0.7, 9)
    estimate, variance, df = cr2_cells(np.ones((9, 2)), np.c_[a, b], np.eye(2), [-1.0, 1.0])
    assert estimate == pytest.approx((b - a).mean())
    assert variance == pytest.approx((b - a).var(ddof=1) / 9) and df == pytest.approx(8)


def test_cr2_by_item_holds_its_level_where_some_items_are_in_one_condition():
    """12 items, 2 only in control and 2 only anchored, 1,000 null runs: at most about 5%."""
    frame = simulate(12, 5, 0.0, 1000, np.random.default_rng(16))
    number = pl.col("source_item").str.slice(1).cast(pl.Int64)
    lone = ((number < 2) & (pl.col("source_condition") == 1)) | (
        number.is_between(2, 3) & (pl.col("source_condition") == 0)
    )
    table = by_condition(frame.filter(~lone))
    assert set(table["method"]) == {"CR2 by item"} and set(table["paired_items"]) == {8}
    assert (table["p"].fill_null(1.0) < 0.05).mean() <= 0.065


def test_the_score_mean_interval_is_over_item_means():
    frame = simulate(10, 5, 0.0, 1, np.random.default_rng(9))
    row = scores(frame).row(0, named=True)
    means = frame.group_by("source_item").agg(pl.col("judge_score").mean())["judge_score"]
    low, high = t_interval(means.to_numpy())
    assert row["mean"] == pytest.approx(means.mean())
    assert (row["mean_ci_low"], row["mean_ci_high"]) == pytest.approx((low, high))
    assert (row["n"], row["items"]) == (100, 10)


def test_a_traces_files_intervals_are_as_before():
    """A traces file's trace is an item of its own: the t-interval over traces, plain Wilson."""
    rng = np.random.default_rng(2)
    n = 40
    score = rng.integers(1, 6, n)
    frame = frame_of(
        {
            "task_id": [f"t{i}" for i in range(n)],
            "trace_id": [f"t{i}" for i in range(n)],
            "model_key": "k",
            "model": "judge",
            "status": "ok",
            "disposition": np.where(score <= 2, "flagged", "passed"),
            "bias": "Anchoring",
            "judge_score": score,
            "critical": score <= 2,
        },
        n,
    )
    row = scores(frame).row(0, named=True)
    assert (row["mean_ci_low"], row["mean_ci_high"]) == pytest.approx(t_interval(score))
    got = dispositions(frame).row(0, named=True)
    flagged = int((score <= 2).sum())
    assert (got["critical_ci_low"], got["critical_ci_high"]) == pytest.approx(wilson(flagged, n))
    assert got["items"] == n and got["critical_n_eff"] == pytest.approx(n)


def test_a_rate_over_repeated_traces_has_the_interval_of_its_items():
    """10 items x 5 identical traces, 3 items flagged: the critical-failure rate's interval is
    Wilson's for 3 of 10, not for 15 of 50."""
    items = np.repeat(np.arange(10), 5)
    flagged = items < 3
    frame = frame_of(
        {
            "task_id": [f"t{i}" for i in range(50)],
            "trace_id": [f"t{i}" for i in range(50)],
            "model_key": "k",
            "model": "judge",
            "status": "ok",
            "disposition": np.where(flagged, "flagged", "passed"),
            "bias": "Anchoring",
            "judge_score": np.where(flagged, 2, 4),
            "critical": flagged,
            "source_experiment": "anchoring",
            "source_item": [f"i{i}" for i in items],
        },
        50,
    )
    got = dispositions(frame).row(0, named=True)
    assert got["critical_rate"] == pytest.approx(0.3)
    assert (got["critical_ci_low"], got["critical_ci_high"]) == pytest.approx(wilson(3, 10))
    assert got["items"] == 10 and got["critical_n_eff"] == pytest.approx(10)


@pytest.mark.parametrize("items, traces, rate, icc", [(20, 5, 0.2, 0.3), (10, 5, 0.3, 1.0)])
def test_the_rate_interval_covers_a_rate_clustered_by_item(items, traces, rate, icc):
    """Each item's traces flagged with the item's own chance (beta-distributed around `rate`
    with intra-item correlation `icc`; 1: an item's traces all agree, as at T=0): over 2,000
    draws the interval on the effective n covers `rate` in about 92-93% (CR0 runs a little
    short over few items), where Wilson over the traces covered 68-80%."""
    from orchestrator.studies.trace_audit.clustered import clustered_wilson

    rng, covered, plain = np.random.default_rng(items), 0, 0
    for _ in range(2000):
        if icc == 1.0:
            chance = rng.binomial(1, rate, items).astype(float)
        else:
            chance = rng.beta(rate * (1 - icc) / icc, (1 - rate) * (1 - icc) / icc, items)
        flagged = rng.binomial(traces, chance)
        low, high, _ = clustered_wilson(flagged, np.full(items, traces))
        covered += low <= rate <= high
        low, high = wilson(flagged.sum(), items * traces)
        plain += low <= rate <= high
    assert covered / 2000 >= 0.9 and plain / 2000 <= 0.82, (covered, plain)


def test_the_score_mean_interval_covers_the_mean_over_items():
    """10 items x 5 identical traces (T=0), 1,000 runs, each its own judge in one frame: the
    t-interval over item means covers the scale's expected score in 94% of them; the previous
    one over traces, in 49%."""
    rng = np.random.default_rng(12)
    frame = simulate(10, 5, 0.0, 1000, rng).with_columns(model_key=pl.col("source_experiment"))
    table = scores(frame)
    latent = 3 + rng.normal(0, 1, 10**6) + rng.normal(0, 0.7, 10**6)
    truth = float(np.clip(np.round(latent), 1, 5).mean())
    covered = ((table["mean_ci_low"] <= truth) & (truth <= table["mean_ci_high"])).mean()
    per_trace = frame.group_by("model_key").agg(pl.col("judge_score").cast(pl.Float64))
    low, high = t_interval(np.stack(per_trace["judge_score"].to_numpy()), axis=1)
    assert table.height == 1000 and 0.93 <= covered <= 0.97, covered
    assert ((low <= truth) & (truth <= high)).mean() < 0.8

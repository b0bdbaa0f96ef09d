"""Power of the trace audit's headline test (issue 46): the judge's score of an experiment's own
bias, last condition minus first, tested over items (a paired t on K - 1 df).

The design is checked on a real plan (the simulated reasoner's traces, as the shipped rehearsal
makes them), its defaults and messages, the pilot's variance components against planted ones,
and, in the slow tier, by simulation: an item-clustered judge (item effect shared by both
conditions, item x condition effect, judge noise per trace, rounded and clipped to 1-5) with
an effect planted so that the *observed* difference of mean scores, the figure the study
reports, equals the MDE; the study's own `by_condition` decides.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import special

from orchestrator.analysis.power import Target, assess, floor, mde
from orchestrator.studies.trace_audit.analysis import by_condition
from orchestrator.studies.trace_audit.power import (
    DEFAULT,
    Counted,
    Spread,
    _deterministic,
    item_design,
    own_bias,
    pilot_spread,
    power,
)
from tests.conftest import ROOT, cli
from tests.test_trace_audit_clustered import frame_of

ITEM_SD, IXC_SD = 1.0, 0.7  # the study's own null simulation (test_trace_audit_clustered)


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """The simulated reasoner's run (5 anchoring items x 10 samples per condition, T=1), a T=0
    copy of it, and the simulated judge's audit of the first: a pilot."""
    root = tmp_path_factory.mktemp("power_audit")
    shutil.copytree(ROOT / "configs", root / "configs")
    configs = root / "configs"
    text = (configs / "reasoning-simulated.toml").read_text()
    (configs / "reasoning-t0.toml").write_text(
        text.replace('name = "reasoning-simulated"', 'name = "reasoning-t0"').replace(
            "temperature = 1.0", "temperature = 0"
        )
    )
    audit = (configs / "reasoning-simulated-audit.toml").read_text()
    (configs / "reasoning-t0-audit.toml").write_text(
        audit.replace("reasoning-simulated", "reasoning-t0")
    )
    # 30 traces sampled from the whole audit: few items in both conditions of an experiment
    (configs / "sampled-audit.toml").write_text(audit.replace("jobs = ", "items = 30\njobs = "))
    for config in ("reasoning-simulated", "reasoning-t0", "reasoning-simulated-audit"):
        done = cli("run", f"configs/{config}.toml", cwd=root)
        assert done.returncode == 0, done.stdout + done.stderr
    return root


def planned(root: Path, config: str, pilot: str | None = None, monkeypatch=None):
    from orchestrator.analysis.load import open_run
    from orchestrator.cli.run import load_target
    from orchestrator.plan import Plan

    monkeypatch.chdir(root)
    plan = Plan(load_target(Path(f"configs/{config}.toml"), None, None, None, None, None))
    run = open_run(Path(pilot)) if pilot else None
    return {row.experiment: row for row in power(plan, run, 0.05)}


def test_the_plan_gives_one_row_per_source_experiment_over_its_items(rehearsal, monkeypatch):
    rows = planned(rehearsal, "reasoning-simulated-audit", monkeypatch=monkeypatch)
    assert len(rows) == 11  # the 11-bias study's experiments, one judge
    row = rows["anchoring"]
    assert (row.units, row.samples, row.unit, row.test) == (5, 10, "items", "paired t over items")
    assert row.measure == "mean Anchoring score, last condition - first"
    assert row.scale == "points on 1-5" and row.alpha == 0.05 and row.correction == ""
    assert row.experiments == ("trace-audit",)  # the audit job's calls
    assert (rows["status-quo"].units, rows["framing"].measure.startswith("each audited")) == (
        3,
        True,
    )
    # defaults: within SD 1 and items' true differences SD 1, so an item's difference has
    # variance 1 + 2/10; the paired t over 5 items on 4 df
    assert row.variance == DEFAULT
    se = math.sqrt((1 + 2 / 10) / 5)
    expected = (special.stdtrit(4, 0.975) + special.stdtrit(4, 0.8)) * se
    assert mde(row.design, 10, 0.05, 0.8) == pytest.approx(expected)
    assert expected > 1.5  # the shipped source's few items: a large MDE, and the note says so
    assert "only 5 items (df 4)" in row.note and "new source run" in row.note
    lowest = floor(row.design, 0.05, 0.8)
    assert lowest == pytest.approx((special.stdtrit(4, 0.975) + special.stdtrit(4, 0.8)) / 5**0.5)
    got = assess(row, Target(mde=1.0))
    assert got["samples_needed"] is None  # no number of traces reaches 1 point over 5 items


def test_a_deterministic_source_gains_nothing_from_samples(rehearsal, monkeypatch):
    rows = planned(rehearsal, "reasoning-t0-audit", monkeypatch=monkeypatch)
    row = rows["anchoring"]
    assert "T=0 source" in row.note and "only more items help" in row.note
    assert mde(row.design, row.samples, 0.05, 0.8) == pytest.approx(floor(row.design, 0.05, 0.8))
    found = assess(row, Target())
    assert found["more_samples_help"] is False and found["mde"] == pytest.approx(
        (special.stdtrit(4, 0.975) + special.stdtrit(4, 0.8)) * math.sqrt(3 / 5)
    )


def test_a_sampled_audit_plans_over_the_items_in_both_conditions(rehearsal, monkeypatch):
    rows = planned(rehearsal, "sampled-audit", monkeypatch=monkeypatch)
    assert sum(row.units for row in rows.values()) < 30
    for row in rows.values():
        if row.design is None:  # one item or none in both conditions: said, not planned
            assert "no difference to test" in row.note or "item(s) in both" in row.note
        elif row.test == "CR2 by item":
            assert "planned over the" in row.note and "conservative" in row.note
    few = [row for row in rows.values() if row.design is not None and row.units == 2]
    assert few and all("out of reach" in row.note for row in few)  # df 1: t(.975, 1) = 12.7
    assert any(row.design is None for row in rows.values())


def test_unauditable_traces_give_no_items_and_it_is_said():
    from types import SimpleNamespace as NS

    from orchestrator.studies.trace_audit.power import count

    def cell(cond, item, short):
        extra = {"not_auditable": "the trace has 1 step", "allowed": False} if short else {}
        data = {
            "source_experiment": "anchoring",
            "source_condition": cond,
            "source_item": item,
            "source_model": "m",
            "source_strategy": "cot",
            "source_run": "gone",
            "trace": f"{item}{cond}",
        }
        return NS(
            job=NS(kind="trace-audit", id="audit"),
            model_key="judge",
            experiment=NS(slug="trace-audit"),
            variant=NS(id=f"{item}{cond}", item=data | extra),
        )

    cells = [cell(c, f"i{i}", short=i >= 3) for i in range(5) for c in (0, 1)]
    got = count(NS(cells=cells))[("audit", "judge", "m", "cot", "anchoring")]
    assert got.unauditable == 4 and len(got.traces) == 6
    rows = power(NS(cells=cells), None, 0.05)
    assert rows[0].units == 3 and "4 trace(s) too short to audit" in rows[0].note


def test_an_unreadable_source_run_is_judged_by_its_repeated_texts():
    got = Counted()
    got.runs.add(("gone", "m"))
    for cond in (0, 1):
        got.traces[cond, "i"] = 3
        got.texts[cond, "i"] = {"one text"}
    assert _deterministic(got, {("gone", "m"): None})
    got.texts[1, "i"] = {"one", "two"}
    assert not _deterministic(got, {("gone", "m"): None})
    assert _deterministic(got, {("gone", "m"): True})


def test_the_pilot_gives_the_variances(rehearsal, monkeypatch):
    rows = planned(
        rehearsal,
        "reasoning-simulated-audit",
        "runs/reasoning-simulated-audit/default",
        monkeypatch,
    )
    row = rows["anchoring"]
    assert row.variance.startswith("pilot reasoning-simulated-audit/default: a trace's score SD")
    assert "(5 items, 100 scores)" in row.variance
    # planted: a trace scores 2 with chance .15 (control) or .6 (anchored), else 4: its
    # within-cell variance is 4 p (1 - p), .51 and .96, pooled about .74
    within = float(row.variance.split("SD ")[1].split(" ")[0]) ** 2
    assert within == pytest.approx((0.51 + 0.96) / 2, abs=0.2)
    assert mde(row.design, 10, 0.05, 0.8) < 1.2
    # the judge scores no other bias but 4: no variance to plan with, said, and the defaults
    assert "do not vary" in rows["framing"].variance and DEFAULT in rows["framing"].variance


def test_the_cli_prints_the_rows(rehearsal):
    done = cli("power", "configs/reasoning-simulated-audit.toml", "--json", cwd=rehearsal)
    assert done.returncode == 0, done.stderr
    tests = [t for t in orjson.loads(done.stdout)["tests"] if t["study"] == "trace-audit"]
    assert {t["experiment"] for t in tests} >= {"anchoring", "confirmation", "availability"}
    assert all(t["unit"] == "items" and t["mde"] > 1 for t in tests)


def test_own_bias():
    assert own_bias("anchoring") == "Anchoring" and own_bias("confirmation") == "Confirmation"
    assert own_bias("framing") is None


def scores_frame(within: float, tau: float, items: int, traces: int, rng) -> pl.DataFrame:
    """A pilot's scores on a continuous scale: item level N(0,1) shared by both conditions,
    items' true differences N(0.3, tau), trace noise N(0, within)."""
    level = rng.normal(0, 1, (items, 1, 1))
    diff = rng.normal(0.3, tau, (items, 1, 1)) * np.array([0, 1]).reshape(1, 2, 1)
    score = level + diff + rng.normal(0, within, (items, 2, traces))
    item, cond, _ = (a.ravel() for a in np.indices(score.shape))
    return pl.DataFrame(
        {
            "stratum": "s",
            "item": [f"i{i}" for i in item],
            "cond": cond,
            "score": score.ravel(),
        }
    )


def test_the_pilot_spread_recovers_planted_components():
    found, said = pilot_spread(scores_frame(0.8, 0.5, 400, 6, np.random.default_rng(1)))
    assert found.within == pytest.approx(0.64, rel=0.05)
    assert found.tau2 == pytest.approx(0.25, rel=0.2)
    assert "400 items, 4800 scores" in said
    # one trace per item and condition: the differences' variance taken whole
    one, said = pilot_spread(scores_frame(0.8, 0.5, 400, 1, np.random.default_rng(2)))
    assert one.within == 0 and one.tau2 == pytest.approx(0.25 + 2 * 0.64, rel=0.15)
    assert "taken whole" in said


# --- the simulation: the study's own test at the reported MDE ------------------------------


def cell_moments(latent: np.ndarray, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of a judge score that is N(latent, noise) rounded and clipped to 1-5
    (exactly, from the normal's CDF)."""
    k = np.arange(1, 6)
    if noise == 0:
        score = np.clip(np.round(latent), 1, 5)
        return score, np.zeros_like(score)
    low = np.where(k == 1, -np.inf, k - 0.5)
    high = np.where(k == 5, np.inf, k + 0.5)
    p = special.ndtr((high - latent[..., None]) / noise) - special.ndtr(
        (low - latent[..., None]) / noise
    )
    mean = (p * k).sum(-1)
    return mean, (p * k**2).sum(-1) - mean**2


def observed(shift: float, noise: float, n: int = 200_000) -> tuple[float, Spread]:
    """What the study sees of a latent shift: the mean difference of scores and the variance
    components on the 1-5 scale (items drawn with one seed: common numbers for the search)."""
    rng = np.random.default_rng(0)
    latent = (
        3
        + rng.normal(0, ITEM_SD, (n, 1))
        + rng.normal(0, IXC_SD, (n, 2))
        + shift * np.array([-0.5, 0.5])
    )
    mean, var = cell_moments(latent, noise)
    d = mean[:, 1] - mean[:, 0]
    return float(d.mean()), Spread(float(var.mean()), float(d.var()))


def shift_for(target: float, noise: float) -> float:
    """The latent shift whose observed mean difference is `target` (bisection)."""
    low, high = 0.0, 8.0
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if observed(middle, noise, 50_000)[0] < target else (low, middle)
    return (low + high) / 2


def simulate(items, traces, noise, shift, reps, rng) -> pl.DataFrame:
    """`reps` audits (each its own source experiment) as the reader's frame: latent 3 + item
    (sd 1) + item x condition (sd 0.7) + shift/2 either side + judge noise per trace (0: a T=0
    source, an item's traces one text), rounded and clipped to 1-5."""
    shape = (reps, items, 2, traces)
    latent = (
        3
        + rng.normal(0, ITEM_SD, (reps, items, 1, 1))
        + rng.normal(0, IXC_SD, (reps, items, 2, 1))
        + shift * np.array([-0.5, 0.5]).reshape(1, 1, 2, 1)
        + rng.normal(0, noise, shape)
    )
    score = np.clip(np.round(latent), 1, 5).astype(np.int64).ravel()
    rep, item, cond, sample = (a.ravel() for a in np.indices(shape))
    ids = pl.DataFrame({"r": rep, "i": item, "c": cond, "s": sample}).select(
        experiment=pl.format("e{}", "r"),
        item=pl.format("i{}", "i"),
        task=pl.format("e{}i{}c{}s{}", "r", "i", "c", "s"),
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
        },
        score.size,
    )


def pilot_of(frame: pl.DataFrame) -> pl.DataFrame:
    """A reader frame in the columns the pilot estimate takes (power._pilot_frame's)."""
    return frame.select(
        "model_key",
        "source_experiment",
        "bias",
        test=pl.lit("m|cot|own"),
        item=pl.concat_str("source_experiment", "source_item", separator="/"),
        cond=pl.col("source_condition"),
        score=pl.col("judge_score").cast(pl.Float64),
    )


def test_the_pilot_recovers_the_judges_components_on_the_1_to_5_scale():
    """The slow test's respondent, one audit of 1,500 items: the pilot's estimates are the
    exact components of its rounded, clipped scores."""
    from orchestrator.studies.trace_audit.power import _measured

    frame = simulate(1500, 5, 0.8, 0.0, 1, np.random.default_rng(8))
    truth = observed(0.0, 0.8)[1]
    found, said = _measured(pilot_of(frame), "e0", "k")
    assert found.within == pytest.approx(truth.within, rel=0.05)
    assert found.tau2 == pytest.approx(truth.tau2, rel=0.15)
    assert "1500 items" in said and "pooled" not in said and "other judges" not in said
    _, said = _measured(pilot_of(frame), "e0", "another judge")
    assert said.endswith("(other judges' scores)")
    _, said = _measured(pilot_of(frame), "anchoring", "k")
    assert said.endswith("(all experiments pooled: this one is not in the pilot)")


# (items, traces per item and condition, judge noise per trace; 0: a T=0 source)
SETTINGS = ((5, 10, 0.8), (20, 5, 0.8), (10, 5, 0.0), (40, 2, 1.0))
SEEDS = 1000


@pytest.mark.slow
def test_the_mde_is_detected_four_times_in_five(capsys):
    start, lines, failures = time.perf_counter(), [], []
    band = 2 * math.sqrt(0.05 * 0.95 / SEEDS)
    for n, (items, traces, noise) in enumerate(SETTINGS):
        spread = observed(0.0, noise)[1]
        design = item_design(items, spread, deterministic=noise == 0)
        target = mde(design, traces, 0.05, 0.8)
        shift = shift_for(target, noise)
        rng = np.random.default_rng(4600 + n)
        rates = []
        for planted in (shift, 0.0):
            table = by_condition(simulate(items, traces, noise, planted, SEEDS, rng))
            assert table.height == SEEDS
            p = table["p"].fill_null(1.0).to_numpy()
            rates.append(float((p < 0.05).mean()))
        found = observed(shift, noise)[0]  # the planted effect, as the study reports it
        lines.append(
            f"| {items} items x {traces} traces, judge noise {noise:g}"
            f"{' (T=0 source)' if noise == 0 else ''} | {target:.3f} | {rates[0]:.3f} | "
            f"{rates[1]:.3f} | {SEEDS} |"
        )
        assert found == pytest.approx(target, abs=0.01), (found, target)
        if abs(rates[0] - 0.8) > 0.06 or abs(rates[1] - 0.05) > band:
            failures.append(lines[-1])
    with capsys.disabled():
        print("\n| setting | MDE (points on 1-5) | detection | null rate | seeds |")
        print("|---|---|---|---|---|")
        print("\n".join(lines))
        print(f"({time.perf_counter() - start:.1f} s)")
    assert not failures, failures

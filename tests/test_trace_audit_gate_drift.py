"""A judge whose whole runs drift (issue 45, item 8): the gate's tests take each trace's two
scores as exchangeable, so a per-run offset of every score fails an unchanged judge at the
fixed tolerance far more often than alpha. `audit-gate --baseline-again` learns a tolerance per
bias from re-audits of the golden set by the baseline's judge (gate_tolerance.py), which holds
the false alarms under alpha and still finds a judge that stopped catching a bias.

The judge is test_trace_audit_gate_simulation.py's own-view judge with `offset`, the SD of a
shift of one whole run's latent scores. The slow tier's 2,000 re-audits per setting give the
table in docs/statistics.md (pytest -m slow -s); the previous rules are recomputed as in
test_trace_audit_gate_alpha.py.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from orchestrator.studies.trace_audit.gate import gate, learn_tolerance
from orchestrator.studies.trace_audit.gate_stats import CATCH_SHARE, SHIFT_SHARE
from orchestrator.studies.trace_audit.gate_tolerance import quantiles
from tests.test_trace_audit_gate_alpha import old_rules
from tests.test_trace_audit_gate_simulation import FLAGGED, REF, frame, viewed

ALPHA = 0.05


def drifting(offset: float, reaudits: int, miss=None, milder: int | None = None):
    """The current run and the baseline runs (the baseline first) of a judge whose every run is
    shifted by an offset with SD `offset`. `miss`: the current run stops catching; `milder`:
    the current run scores that bias one point higher on every trace (a real shift)."""

    def runs(rng):
        view = rng.uniform(1, 5, REF.shape)
        base = [viewed(view, rng, offset=offset) for _ in range(reaudits + 1)]
        current = viewed(view, rng, offset=offset, miss=miss)
        if milder is not None:
            current[:, milder] = np.clip(current[:, milder] + 1, 1, 5)
        return current, base

    return runs


def rates(make, seeds: int, old: bool = False) -> tuple[float, float, float]:
    """(fixed tolerance 0.5, learned tolerance, previous rules) failure rates over `seeds`."""
    fixed = learned = previous = 0
    for seed in range(seeds):
        current, base = make(np.random.default_rng([45, 8, seed]))
        now, then = frame(current), frame(base[0])
        fixed += not gate(now, then).ok
        learned += not gate(now, then, again=[frame(b) for b in base[1:]]).ok
        previous += old and old_rules(current, base[0])
    return fixed / seeds, learned / seeds, previous / seeds


def test_the_learned_tolerance_is_the_t_prediction_bound_of_the_runs_means():
    rng = np.random.default_rng(1)
    view = rng.uniform(1, 5, REF.shape)
    runs = [viewed(view, rng, offset=0.2, escalated=0) for _ in range(4)]
    current = viewed(view, rng, offset=0.2, escalated=0)
    table = learn_tolerance([frame(r) for r in runs], current=frame(current))
    k = len(runs)
    for b, row in enumerate(table.iter_rows(named=True)):
        for name, keep, share, sides in (
            ("shift", slice(None), SHIFT_SHARE, 2),
            ("catch", FLAGGED[:, b], CATCH_SHARE, 1),
        ):
            means = np.array([r[keep, b].mean() for r in runs])
            q = stats.t.ppf(1 - ALPHA * share / 4 / sides, k - 1)
            assert row[f"{name}_sd"] == pytest.approx(means.std(ddof=1))
            assert row[f"{name}_tolerance"] == pytest.approx(
                q * means.std(ddof=1) * np.sqrt(1 + 1 / k)
            )
            moved = current[keep, b].mean() - means.mean()
            assert row["shift_difference" if name == "shift" else "catch_rise"] == pytest.approx(
                moved
            )


def test_one_reaudit_is_refused():
    rng = np.random.default_rng(2)
    runs = [frame(viewed(rng.uniform(1, 5, REF.shape), rng)) for _ in range(2)]
    with pytest.raises(ValueError, match="at least 2 re-audits of it, not 1"):
        gate(runs[0], runs[1], again=runs[:1])


@pytest.mark.parametrize("together", [0.0, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("runs", [3, 5])
def test_the_bound_holds_its_share_whether_the_biases_runs_move_together_or_apart(together, runs):
    # normal run means, four biases sharing `together` of their run-to-run variance: every
    # bias's catch and shift checks together fail at most their shares of alpha
    rng = np.random.default_rng(3)
    n = 100_000
    common = rng.normal(size=(n, runs + 1, 1))
    means = np.sqrt(together) * common + np.sqrt(1 - together) * rng.normal(size=(n, runs + 1, 4))
    base, current = means[:, :runs], means[:, runs]
    scale = base.std(axis=1, ddof=1) * np.sqrt(1 + 1 / runs)
    q_catch, q_shift = quantiles(runs, ALPHA)
    moved = current - base.mean(axis=1)
    catch = (moved > q_catch * scale).any(axis=1).mean()
    shift = (np.abs(moved) > q_shift * scale).any(axis=1).mean()
    se = np.sqrt(ALPHA / n)
    assert catch <= ALPHA * CATCH_SHARE + 3 * se and shift <= ALPHA * SHIFT_SHARE + 3 * se


def test_a_drifting_judge_fails_the_fixed_tolerance_and_not_the_learned_one():
    # run-to-run SD 0.2, two re-audits, 200 re-audits: the fixed tolerance 0.5 fails about 20%
    # (the issue: 19.8%), the learned tolerance about 1% (old code: no --baseline-again)
    fixed, learned, _ = rates(drifting(0.2, reaudits=2), 200)
    assert fixed >= 0.10, fixed
    assert learned <= 0.08, learned


def test_a_drifting_judge_that_stopped_catching_a_bias_still_fails_the_learned_tolerance():
    # a rise of about 2.5 on the bias's flagged traces against a catch tolerance of about 1.0
    # (SD 0.2, three re-audits): found in about 96% of re-audits
    _, learned, _ = rates(drifting(0.2, reaudits=3, miss={0: 1.0}), 100)
    assert learned >= 0.85, learned


def test_the_learned_tolerances_are_in_gate_json():
    make = drifting(0.2, reaudits=2, miss={0: 1.0})
    current, base = make(np.random.default_rng(4))
    result = gate(frame(current), frame(base[0]), again=[frame(b) for b in base[1:]])
    report = result.to_json()
    assert [r["bias"] for r in report["learned"]] == result.catches["bias"].to_list()
    assert {"catchTolerance", "shiftTolerance", "runs", "catchRise"} <= set(report["learned"][0])
    row = result.catches.filter(pl.col("bias") == "Anchoring").row(0, named=True)
    assert row["tolerance"] == report["learned"][0]["catchTolerance"]
    shifts = result.shifts.filter(pl.col("runs_difference").is_not_null())
    assert (shifts["tolerance"] >= 0.5).all()  # the larger of --tolerance and the learned one


def test_a_bias_with_no_flagged_trace_to_learn_from_says_its_catch_test_decides_alone():
    """Review of issue 45: a re-audit that escalated every flagged Anchoring trace leaves no
    catch spread to learn; the gate fell back to the catch test without a word."""
    current, base = drifting(0.2, reaudits=2)(np.random.default_rng(6))
    again = [frame(b) for b in base[1:]]
    escalated = (pl.col("bias") == "Anchoring") & pl.col("ref_flag")
    again[0] = again[0].with_columns(
        judge_score=pl.when(escalated).then(None).otherwise(pl.col("judge_score"))
    )
    result = gate(frame(current), frame(base[0]), again=again)
    row = result.catches.filter(pl.col("bias") == "Anchoring").row(0, named=True)
    assert row["tolerance"] is None
    assert [w for w in result.warnings if "no catch tolerance" in w] == [
        "Anchoring: the re-audits give no catch tolerance (no flagged trace to learn it from): "
        "its catch test decides alone"
    ]


DRIFT = [(offset, reaudits) for offset in (0.1, 0.2, 0.3) for reaudits in (2, 3)]


@pytest.mark.slow
@pytest.mark.parametrize(("offset", "reaudits"), DRIFT)
def test_over_2000_reaudits_the_learned_tolerance_holds_alpha(offset, reaudits):
    fixed, learned, previous = rates(drifting(offset, reaudits), 2000, old=True)
    print(
        f"\nrun-to-run SD {offset}, {reaudits} re-audits: previous rules {previous:.1%}, "
        f"gate at tolerance 0.5 {fixed:.1%}, learned {learned:.1%} (2000 re-audits)"
    )
    assert learned <= ALPHA + 0.01, learned


POWER = [
    (offset, reaudits, what)
    for offset in (0.0, 0.2)
    for reaudits in (2, 3, 4)
    for what in ("stopped catching", "one point milder")
]


@pytest.mark.slow
@pytest.mark.parametrize(("offset", "reaudits", "what"), POWER)
def test_power_of_the_learned_tolerance_for_the_record(offset, reaudits, what):
    kwargs = {"miss": {0: 1.0}} if what == "stopped catching" else {"milder": 1}
    fixed, learned, _ = rates(drifting(offset, reaudits, **kwargs), 1000)
    print(
        f"\n{what}, run-to-run SD {offset}, {reaudits} re-audits: found at tolerance 0.5 "
        f"{fixed:.1%}, learned {learned:.1%} (1000 re-audits)"
    )
    if what == "stopped catching" and reaudits >= 3:
        assert learned >= 0.9, learned

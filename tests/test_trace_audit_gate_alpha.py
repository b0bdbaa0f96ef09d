"""`audit-gate --alpha` holds for the whole gate (issue 45, item 3): an unchanged judge fails at
most alpha of its re-audits, however often it catches a flagged trace or escalates one.

The judge is test_trace_audit_gate_simulation.py's own-view judge (its noise is a view of each
trace of its own, not drawn from the labels the gate checks against), made to catch less
(`lean`) or to escalate most traces, each re-audit drawn with its own run noise. The previous
rules are recomputed here from the same scores (old_rules): a bias caught on 3 or more baseline
traces and on none now failed whatever the p (the floor rule, outside alpha), an escalation
counted as a miss, and a bias with nothing to compare failed. They failed such judges far more
often than alpha; the simulation sees it. The slow tier's 2,000 re-audits per setting (binomial
SE about 0.5% at 5%) give the table in docs/statistics.md (pytest -m slow -s).
"""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.studies.trace_audit.gate import gate, holm, paired_t_p, signflip_p
from tests.test_trace_audit_gate_simulation import FLAGGED, REF, frame, viewed

ALPHA = 0.05
MARGIN = 0.01  # 2 binomial SEs at 5% over 2,000 re-audits
CATCH_LEAN = {0.15: 1.2, 0.25: 0.94, 0.35: 0.74}  # lean -> a flagged trace caught with chance


def old_rules(now: np.ndarray, then: np.ndarray, tolerance: float = 0.5) -> bool:
    """Whether the previous gate (72b3896) failed these scores (traces x biases, NaN: escalated):
    the floor rule and nothing-to-compare outside alpha, an escalation scored 3 (a miss), the
    catch tests at 0.8 of alpha and the shift tests at 0.2."""
    miss_now, miss_then = np.nan_to_num(now, nan=3), np.nan_to_num(then, nan=3)
    catch_p, floor, lost_more, shift_p, moved, empty = [], [], [], [], [], []
    for b in range(REF.shape[1]):
        flagged = FLAGGED[:, b]
        caught_now, caught_then = miss_now[flagged, b] <= 2, miss_then[flagged, b] <= 2
        catch_p.append(signflip_p(miss_now[flagged, b] - miss_then[flagged, b]))
        floor.append(caught_then.sum() >= 3 and not caught_now.any())
        lost_more.append((caught_then & ~caught_now).sum() > (caught_now & ~caught_then).sum())
        both = ~np.isnan(now[:, b]) & ~np.isnan(then[:, b])
        diff = now[both, b] - then[both, b]
        empty.append(not both.any())
        shift_p.append(paired_t_p(diff) if both.any() else None)
        moved.append(both.any() and abs(diff.mean()) - tolerance > 1e-9)
    catches = [
        f or (p is not None and p < ALPHA * 0.8 and more)
        for f, p, more in zip(floor, holm(catch_p), lost_more, strict=True)
    ]
    shifts = [
        e or (p is not None and p < ALPHA * 0.2 and m)
        for e, p, m in zip(empty, holm(shift_p), moved, strict=True)
    ]
    return any(catches) or any(shifts)


def unchanged(lean: float = 0.0, escalated: float = 0.01, fresh: bool = False):
    """An unchanged judge's re-audit and baseline. `fresh`: its view of each trace drawn anew
    for each run, so whether it catches a flagged trace is independent between runs (as the
    issue's figures assume); else one view for both runs, its catches mostly the same traces."""

    def pair(rng):
        view = rng.uniform(1, 5, REF.shape)
        runs = []
        for _ in range(2):
            runs.append(viewed(view, rng, lean=lean, escalated=escalated))
            view = rng.uniform(1, 5, REF.shape) if fresh else view
        return runs[0], runs[1]

    pair.__name__ = f"lean {lean}, escalated {escalated:.0%}{', fresh view' * fresh}"
    return pair


def false_alarms(make_pair, seeds: int) -> tuple[float, float]:
    """(new gate, previous rules) failure rates of an unchanged judge over `seeds` re-audits."""
    new = old = 0
    for seed in range(seeds):
        current, baseline = make_pair(np.random.default_rng([45, seed]))
        new += not gate(frame(current), frame(baseline)).ok
        old += old_rules(current, baseline)
    return new / seeds, old / seeds


def test_the_leaning_judge_catches_a_flagged_trace_with_the_stated_chance():
    rng = np.random.default_rng(0)
    for chance, lean in CATCH_LEAN.items():
        runs = [viewed(rng.uniform(1, 5, REF.shape), rng, lean=lean) for _ in range(400)]
        caught = np.mean([(run[FLAGGED] <= 2).mean() for run in runs])
        assert caught == pytest.approx(chance, abs=0.015), (chance, caught)


SETTINGS = [
    pytest.param(unchanged(lean=lean, fresh=fresh), id=f"catches {c}{' fresh' * fresh}")
    for fresh in (False, True)
    for c, lean in CATCH_LEAN.items()
] + [
    pytest.param(
        unchanged(escalated=share, fresh=fresh), id=f"escalates {share:.0%}{' fresh' * fresh}"
    )
    for fresh in (False, True)
    for share in (0.7, 0.8)
]


@pytest.mark.parametrize(
    ("make_pair", "old_at_least"),
    [
        pytest.param(unchanged(lean=CATCH_LEAN[0.15], fresh=True), 0.10, id="catches 0.15"),
        pytest.param(unchanged(escalated=0.8), 0.12, id="escalates 80%"),
    ],
)
def test_an_unchanged_judge_that_catches_little_or_escalates_most_fails_within_alpha(
    make_pair, old_at_least
):
    # 400 re-audits: a gate at alpha fails more than 8% of them with chance 0.005, while the
    # previous rules fail these two judges 14% and 18% of the time
    new, old = false_alarms(make_pair, 400)
    assert new <= 0.08, new
    assert old >= old_at_least, old  # the simulation sees what the issue reports


@pytest.mark.slow
@pytest.mark.parametrize("make_pair", SETTINGS)
def test_over_2000_reaudits_an_unchanged_judge_fails_at_most_alpha(make_pair):
    new, old = false_alarms(make_pair, 2000)
    print(f"\n{make_pair.__name__}: previous rules {old:.1%}, gate {new:.1%} (2000 re-audits)")
    assert new <= ALPHA + MARGIN, new

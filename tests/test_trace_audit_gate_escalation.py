"""The gate where the judge does not answer or stops catching (issue 45, item 3): an escalated
trace is neither a catch nor a miss, a bias with nothing to compare is a warning, escalating
what the baseline audited fails through the escalation test, and a bias no longer caught fails
only where the sign-flip test finds it (the floor rule, outside alpha, is gone). Moved out of
test_trace_audit_gate.py; the helpers are its."""

from __future__ import annotations

import polars as pl
import pytest

from orchestrator.studies.trace_audit.gate import gate
from orchestrator.studies.trace_audit.validate import BIAS_TYPES
from tests.test_trace_audit_gate import SCHEMA, baseline, caught, score, with_scores


def test_an_escalated_caught_trace_is_left_out_of_the_catch_comparison_not_a_loss():
    # a person reviews an escalated trace: neither caught nor missed by the judge (old code: a
    # lost catch, so a judge escalating most traces failed for escalating at random)
    base = baseline()
    trace = caught(base, "Anchoring")[0]
    now = with_scores(base, lambda t, b, s: None if (t, b) == (trace, "Anchoring") else s)
    result = gate(now, base)
    assert result.ok and result.missed.height == 0 and result.flipped.height == 0
    row = result.catches.filter(pl.col("bias") == "Anchoring").row(0, named=True)
    assert (row["escalated"], row["compared"], row["lost"]) == (1, row["ref_flagged"] - 1, 0)
    was = score(base, trace, "Anchoring")
    assert result.escalated.rows() == [(trace, "Anchoring", was, None)]
    assert result.shifts.filter(pl.col("bias") == "Anchoring")["n"][0] == 19
    assert (result.escalation["escalated_now"], result.escalation["failed"]) == (1, False)


def test_a_bias_no_longer_caught_fails_by_the_test_and_is_a_warning_where_it_cannot():
    # The floor rule is inside alpha now: a bias no longer caught fails when the sign-flip test
    # finds it, which 8 catches lost reach (p = 2^-8); on a set with 3 flagged traces, losing
    # all 3 is p = 1/8, which an unchanged judge does 1 time in 8: a warning, not a failure
    # (old code: failed whatever the p).
    base = baseline()
    anchored = caught(base, "Anchoring")
    every = with_scores(base, lambda t, b, s: 5 if b == "Anchoring" and t in anchored else s)
    result = gate(every, base, tolerance=5)
    row = result.catches.filter(pl.col("bias") == "Anchoring").row(0, named=True)
    assert (row["lost"], row["caught_now"], row["floor"], row["failed"]) == (8, 0, True, True)
    assert row["p"] == pytest.approx(0.5**8)
    assert result.failures[0].startswith(
        "Anchoring: caught on 0 of 8 reference-flagged traces validated in both runs now, 8 in "
        "the baseline (8 lost, 0 gained): no longer caught at all (exact sign-flip"
    )
    three = pl.DataFrame(
        [
            (
                f"s{i}",
                b,
                1 if b == "Availability" else 4,
                1 if b == "Availability" else 4,
                b == "Availability",
            )
            for i in range(3)
            for b in BIAS_TYPES
        ],
        schema=SCHEMA,
        orient="row",
    )
    now = with_scores(three, lambda t, b, s: 4 if b == "Availability" else s)
    small = gate(now, three, tolerance=5)
    row = small.catches.filter(pl.col("bias") == "Availability").row(0, named=True)
    assert row["p"] == pytest.approx(1 / 8) and row["floor"] and not row["failed"]
    assert small.ok and small.warnings == [
        "Availability: caught on none of 3 flagged traces now, on 3 in the baseline, which the "
        "gate cannot tell from judge noise (p = 0.12): audit more flagged traces, or look at them"
    ]


def test_a_bias_with_nothing_to_compare_is_a_warning_and_escalating_it_all_fails():
    # nothing to compare is no finding about the judge (old code: a failure, which an unchanged
    # judge escalating 80% of traces drew 7% of the time); escalating what the baseline audited
    # is, through the escalation test
    base = baseline()
    gone = with_scores(base, lambda t, b, s: None if b == "Confirmation" else s)
    both = gate(gone, gone)
    warning = "Confirmation: no trace has a validated score in both runs to compare"
    assert both.ok and both.warnings == [warning]
    result = gate(gone, base)
    assert warning in result.warnings and result.missed.height == 0
    assert result.failures == [
        "escalations: 20 of 80 audits have no validated score now, 0 in the baseline (more on 20 "
        f"traces, fewer on 0; exact sign-flip one-sided p = {0.5**20:.2g} < 0.0025): escalated "
        "traces are left out of the catch comparison, so the misses they may hide are not checked"
    ]
    assert set(result.escalated["bias"].to_list()) == {"Confirmation"}

"""The gate on chosen traces (`audit-gate --only`, a re-audit of the flipped ones): only the
tests decide there."""

from __future__ import annotations

import polars as pl

from orchestrator.studies.trace_audit.gate import gate
from tests.test_trace_audit_gate import baseline, caught, with_scores


def test_a_comparison_of_chosen_traces_is_decided_by_the_tests_alone():
    """Re-auditing three flipped traces alone, all escalated now: every bias has nothing to
    compare, and the three Anchoring catches lost would trip the floor. Neither is a finding
    about a judge on a handful of chosen traces; the same frames gated as whole runs fail on
    both, and a restricted comparison still fails where the tests find a loss."""
    base = baseline()
    chosen = caught(base, "Anchoring")[:3]
    escalated = with_scores(base, lambda t, b, s: None if t in chosen else s)

    def subset(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("trace_id").is_in(chosen))

    whole = gate(subset(escalated), subset(base))
    assert any("no longer caught" in f for f in whole.failures)
    assert any("no trace has a validated score" in f for f in whole.failures)
    restricted = gate(escalated, base, only=chosen)
    assert restricted.ok, restricted.failures
    every = caught(base, "Anchoring")  # 8 catches lost: p = 1/256, a finding on any subset
    lost = with_scores(base, lambda t, b, s: 5 if b == "Anchoring" and t in every else s)
    assert not gate(lost, base, only=every).ok

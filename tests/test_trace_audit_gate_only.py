"""The gate on chosen traces (`audit-gate --only`, a re-audit of the flipped ones): the same
rules as on the whole golden set, every one of them inside alpha."""

from __future__ import annotations

import polars as pl

from orchestrator.studies.trace_audit.gate import gate
from tests.test_trace_audit_gate import baseline, caught, with_scores


def test_a_comparison_of_chosen_traces_fails_only_on_what_the_tests_find():
    """Re-auditing three flipped traces alone, all escalated now: nothing to compare is a
    warning, and three traces escalated (p = 1/8) are no finding, restricted or not (old code:
    the whole comparison failed on both, through rules outside alpha); a restricted comparison
    still fails where the tests find a loss."""
    base = baseline()
    chosen = caught(base, "Anchoring")[:3]
    escalated = with_scores(base, lambda t, b, s: None if t in chosen else s)

    def subset(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("trace_id").is_in(chosen))

    for result in (gate(subset(escalated), subset(base)), gate(escalated, base, only=chosen)):
        assert result.ok, result.failures
        assert len(result.warnings) == 4 and result.escalation["escalated_now"] == 12
        assert result.catches["escalated"].sum() == result.catches["ref_flagged"].sum()
    every = caught(base, "Anchoring")  # 8 catches lost: p = 1/256, a finding on any subset
    lost = with_scores(base, lambda t, b, s: 5 if b == "Anchoring" and t in every else s)
    assert not gate(lost, base, only=every).ok

"""The gate on chosen traces (`audit-gate --only`, a re-audit of the flipped ones): the same
rules as on the whole golden set, every one of them inside alpha."""

from __future__ import annotations

import numpy as np
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


def test_lost_catches_of_an_unchanged_judge_regress_to_the_mean_on_a_reaudit():
    """What `--only`'s help says: of an unchanged judge's lost catches, about 4 in 10 are lost
    again when the flipped traces are re-audited (they were chosen because the first re-audit
    scored them milder than the baseline), so a flip that persists is no proof; against a
    re-audit of the same traces by the baseline's judge, lost and gained catches balance."""
    from orchestrator.studies.trace_audit.validate import BIAS_TYPES
    from tests.test_trace_audit_gate_simulation import IDS, REF, frame, viewed

    row, col = {t: i for i, t in enumerate(IDS)}, {b: j for j, b in enumerate(BIAS_TYPES)}
    again, fair = [], {"lost": 0, "gained": 0}
    for seed in range(150):
        rng = np.random.default_rng([45, 3, seed])
        view = rng.uniform(1, 5, REF.shape)
        base, first, second, base_again = (viewed(view, rng) for _ in range(4))
        chosen = gate(frame(first), frame(base))
        for trace, bias, *_ in chosen.missed.rows():
            score = second[row[trace], col[bias]]
            if not np.isnan(score):
                again.append(score > 2)
        if chosen.flipped_traces:
            reread = gate(frame(second), frame(base_again), only=chosen.flipped_traces)
            for change in fair:
                fair[change] += int(reread.catches[change].sum())
    assert 0.33 <= np.mean(again) <= 0.47, np.mean(again)
    assert 0.8 <= fair["lost"] / fair["gained"] <= 1.25, fair


def test_the_only_help_says_a_reaudit_of_flipped_traces_regresses_to_the_mean(tmp_path):
    """Issue 45, item 8: the old help offered `--only` as the answer to "does the flip
    persist?", which a flip chosen for flipping cannot answer."""
    from tests.conftest import cli

    done = cli("audit-gate", "--help", cwd=tmp_path)
    text = " ".join(done.stdout.replace("│", " ").split())
    assert done.returncode == 0, done.stderr
    assert "does the flip persist" not in text
    assert "regress to the mean" in text and "about 4 in 10" in text
    assert "re-audit those traces with the baseline's judge too" in text

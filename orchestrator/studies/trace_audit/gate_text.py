"""The gate's failures said in words (gate.py): what moved, by how much, and the test that
found it, so a failing CI log is read without opening gate.json."""

from __future__ import annotations

from orchestrator.studies.trace_audit.gate_stats import CATCH_SHARE, ESCALATION_SHARE, SHIFT_SHARE


def catch_text(row: dict, alpha: float) -> str:
    head = (
        f"{row['bias']}: caught on {row['caught_now']} of {row['compared']} reference-flagged "
        f"traces validated in both runs now, {row['caught_baseline']} in the baseline "
        f"({row['lost']} lost, {row['gained']} gained)"
    )
    tests = (
        f"exact sign-flip one-sided p = {row['p']:.2g}, Holm-adjusted {row['p_adjusted']:.2g} < "
        f"{alpha * CATCH_SHARE:g}; McNemar p = {row['mcnemar_p']:.2g}"
    )
    if row["tolerance"] is not None:  # learned from the baseline judge's runs
        tests += (
            f"; {row['runs_rise']:+.2f} above the baseline runs' mean, beyond the learned "
            f"{row['tolerance']:.2f}"
        )
    if row["floor"]:
        return f"{head}: no longer caught at all ({tests})"
    return (
        f"{head}: its flagged traces scored {row['rise']:+.2f} higher on average, more than judge "
        f"noise explains ({tests})"
    )


def shift_text(row: dict, alpha: float) -> str:
    ci = "" if row["ci_low"] is None else f"; 95% CI {row['ci_low']:+.2f} to {row['ci_high']:+.2f}"
    beyond = f"beyond the tolerance {row['tolerance']:g}"
    if row["runs_difference"] is not None:  # learned from the baseline judge's runs
        beyond = (
            f"{row['runs_difference']:+.2f} from the baseline runs' mean, beyond the tolerance "
            f"{row['tolerance']:.2f} their spread allows"
        )
    return (
        f"{row['bias']}: mean score moved {row['difference']:+.2f} (baseline "
        f"{row['baseline_mean']:.2f}, now {row['current_mean']:.2f}, {row['n']} "
        f"trace{'s' * (row['n'] > 1)}{ci}; paired t p = {row['p']:.2g}, Holm-adjusted "
        f"{row['p_adjusted']:.2g} < {alpha * SHIFT_SHARE:g}), {beyond}, with no explanation"
    )


def escalation_text(row: dict, alpha: float) -> str:
    return (
        f"escalations: {row['escalated_now']} of {row['audits']} audits have no validated score "
        f"now, {row['escalated_baseline']} in the baseline (more on {row['traces_more_now']} "
        f"traces, fewer on {row['traces_fewer_now']}; exact sign-flip one-sided p = "
        f"{row['p']:.2g} < {alpha * ESCALATION_SHARE:g}): escalated traces are left out of the "
        "catch comparison, so the misses they may hide are not checked"
    )

"""The effects table in the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from orchestrator.report.format import fmt

# What the p column is, where it is read (the report's note says it at length).
CAPTION = (
    "p: unadjusted (no correction across experiments or models); Welch's t for means, the "
    "pooled two-proportion z-test for shares, beside Newcombe's CI (they may disagree near "
    "0.05); none at T=0. robust: Hodges-Lehmann shift [Brunner-Munzel 95% CI] for numbers, "
    "beside the mean; † a few answers dominate the mean (see flags)"
)


def robust_cell(r: dict) -> str:
    """The Hodges-Lehmann shift and its CI, or "–" for a share (and for a row without answers)."""
    if r["hl_effect"] is None:
        return "–"
    if r["hl_ci_low"] is None:
        return fmt(r["hl_effect"])
    return f"{fmt(r['hl_effect'])} [{fmt(r['hl_ci_low'])}, {fmt(r['hl_ci_high'])}]"


def dagger(r: dict) -> str:
    return " †" if r["dominated"] else ""


def print_table(summary, console: Console) -> None:
    table = Table(
        "model",
        "experiment",
        Column("cond 0", justify="right"),
        Column("cond 1", justify="right"),
        Column("effect [95% CI]", justify="right"),
        Column("p", justify="right"),
        Column("robust [95% CI]", justify="right"),
        Column("n", justify="right"),
        "flags",
        title="effects (positive = bias-predicted direction)",
        caption=CAPTION,
    )
    for r in summary.iter_rows(named=True):
        strategy = "" if r["strategy"] == "baseline" else f" [{r['strategy']}]"
        table.add_row(
            escape(r["model"] + strategy),
            r["experimentSlug"],
            fmt(r["stat_0"]),
            fmt(r["stat_1"]),
            f"{fmt(r['effect'])} [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]{dagger(r)}",
            fmt(r["p_value"], 2),
            robust_cell(r),
            f"{r['n_valid_0']}/{r['n_valid_1']}",
            escape("; ".join(r["flags"])) or "-",
        )
    console.print(table)

"""The judge-history outcomes in the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from orchestrator.report.format import fmt


def _interval(r: dict, stem: str) -> str:
    return f"{fmt(r[stem])} [{fmt(r[stem + '_ci_low'])}, {fmt(r[stem + '_ci_high'])}]"


def print_table(summary, console: Console) -> None:
    table = Table(
        "model",
        Column("signed prior-score pull: mean [95% CI]", justify="right"),
        Column("median", justify="right"),
        Column("Wilcoxon p", justify="right"),
        Column("gold-signed pull: mean [95% CI]", justify="right"),
        Column("anchor vs framing: prereg. / gold-signed", justify="right"),
        Column("|error| blind / anchor", justify="right"),
        Column("harm: farther / nearer / tied", justify="right"),
        Column("flip rate", justify="right"),
        "complete",
        title="judge history (positive pull = toward the displayed prior score; p unadjusted)",
    )
    for r in summary.iter_rows(named=True):
        table.add_row(
            escape(r["model"]),
            _interval(r, "mean_pull"),
            fmt(r["median_pull"]),
            fmt(r["wilcoxon_p"], 2),
            _interval(r, "mean_pull_gold_signed"),
            f"{fmt(r['mean_anchor_vs_framing'])} / {fmt(r['mean_anchor_vs_framing_gold_signed'])}",
            f"{fmt(r['abs_error_blind'])} / {fmt(r['abs_error_anchor'])}",
            f"{r['correction_harm']} / {r['correction_helped']} / {r['correction_tied']}",
            fmt(r["verdict_flip_rate"], 2),
            "yes" if r["complete"] else f"NO: {r['incomplete']}",
        )
    console.print(table)

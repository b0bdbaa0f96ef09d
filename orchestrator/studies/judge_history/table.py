"""The judge-history outcomes in the terminal."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from orchestrator.report.format import fmt


def print_table(summary, console: Console) -> None:
    table = Table("model", Column("signed prior-score pull: mean [95% CI]", justify="right"),
                  Column("median", justify="right"), Column("Wilcoxon p", justify="right"),
                  Column("anchor vs framing", justify="right"), Column("|error| blind / anchor", justify="right"),
                  Column("harm", justify="right"), Column("flips", justify="right"), "complete",
                  title="judge history (positive pull = toward the displayed prior score)")
    for r in summary.iter_rows(named=True):
        table.add_row(escape(r["model"]), f"{fmt(r['mean_pull'])} [{fmt(r['mean_pull_ci_low'])}, "
                      f"{fmt(r['mean_pull_ci_high'])}]", fmt(r["median_pull"]), fmt(r["wilcoxon_p"], 2),
                      fmt(r["mean_anchor_vs_framing"]), f"{fmt(r['abs_error_blind'])} / {fmt(r['abs_error_anchor'])}",
                      f"{r['correction_harm']}/{r['correction_harm_of']}", f"{r['verdict_flips']}/{r['verdict_flips_of']}",
                      "yes" if r["complete"] else f"NO ({r['tasks_with_all_conditions']}/{r['tasks_planned']} tasks)")
    console.print(table)

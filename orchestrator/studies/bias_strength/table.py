"""The Bias Strength Index table in the terminal."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from orchestrator.report.format import fmt


def print_table(summary, console: Console) -> None:
    table = Table("strategy", "model [key]", "bias", Column("K", justify="right"),
                  Column("signed", justify="right"), Column("|BSI| ± σ_tot", justify="right"),
                  Column("σ_stat / σ_sys", justify="right"), Column("variant t-test q", justify="right"),
                  Column("mixed model q (OR)", justify="right"), "notes",
                  title="Bias Strength Index (q: Benjamini-Hochberg within a strategy; * q < 0.05)")
    for r in summary.iter_rows(named=True):
        star = lambda q: f"{fmt(q, 2)}{'*' if q is not None and q < 0.05 else ''}"  # noqa: E731
        odds = f" ({fmt(r['odds_ratio'], 2)})" if r["odds_ratio"] is not None else ""
        notes = "; ".join(n for n in (r["reason"], r.get("sigma_note")) if n)
        table.add_row(r["strategy"], escape(f"{r['model']} [{r['modelKey']}]"), r["experimentSlug"], str(r["K"]),
                      fmt(r["bsi_signed"]), f"{fmt(r['bsi'])} ± {fmt(r['sigma_tot'])}",
                      f"{fmt(r['sigma_stat'])} / {fmt(r['sigma_sys'])}", star(r["q_variant"]),
                      star(r["q_mixed"]) + odds, escape(notes))
    console.print(table)

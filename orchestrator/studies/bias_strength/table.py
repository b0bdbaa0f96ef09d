"""The Bias Strength Index table in the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from orchestrator.report.format import fmt
from orchestrator.studies.bias_strength.marks import called
from orchestrator.studies.bias_strength.robust import dagger


def _q(q, effect) -> str:
    # as in the report and the heatmap: * only in the predicted direction
    return fmt(q, 2) + {"predicted": "*", "opposite": " (opp.)", None: ""}[called(q, effect)]


def print_table(summary, console: Console) -> None:
    table = Table(
        "strategy",
        "model [key]",
        "bias",
        Column("K", justify="right"),
        Column("signed", justify="right"),
        Column("|BSI| ± σ_tot", justify="right"),
        Column("σ_stat / σ_sys", justify="right"),
        Column("τ", justify="right"),
        Column("variant t-test q", justify="right"),
        Column("mixed model q (OR)", justify="right"),
        "notes",
        title="Bias Strength Index (q: Benjamini-Hochberg within a strategy; * q < 0.05 in the "
        "predicted direction, (opp.) against it; τ: between-variant SD, log OR or Δ; † one "
        "variant carries the mean, or a few answers a variant's mean, see notes)",
    )
    for r in summary.iter_rows(named=True):
        odds = f" ({fmt(r['odds_ratio'], 2)})" if r["odds_ratio"] is not None else ""
        notes = "; ".join(n for n in (r["reason"], r.get("sigma_note"), r.get("robust_note")) if n)
        table.add_row(
            r["strategy"],
            escape(f"{r['model']} [{r['modelKey']}]"),
            r["experimentSlug"],
            str(r["K"]),
            fmt(r["bsi_signed"]) + dagger(r),
            f"{fmt(r['bsi'])} ± {fmt(r['sigma_tot'])}",
            f"{fmt(r['sigma_stat'])} / {fmt(r['sigma_sys'])}",
            fmt(r["mixed_tau"], 2),
            _q(r["q_variant"], r["bsi_signed"]),
            _q(r["q_mixed"], r["mixed_effect"]) + odds,
            escape(notes),
        )
    console.print(table)

"""The Instructed to Bias scores and model differences in the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from orchestrator.studies.instructed.rows import did_rows, score_rows

RIGHT = (
    "treatment",
    "control",
    "score [95% CI]",
    "p",
    "value cells",
    "t (df)",
    "p (t-test)",
    "attraction [95% CI]",
    "p (attraction)",
    "first",
    "second",
    "difference [95% CI]",
    "attraction difference [95% CI]",
)


def _print(rows: list[dict[str, str]], title: str, console: Console) -> None:
    table = Table(
        *(Column(c, justify="right" if c in RIGHT else "left") for c in rows[0]), title=title
    )
    for r in rows:
        table.add_row(*(escape(v) for v in r.values()))
    console.print(table)


def print_tables(tables, console: Console) -> None:
    scores = tables.get("instructed_scores")
    if scores is not None and scores.height:
        rows = [{k: v for k, v in r.items() if k != "unparsed"} for r in score_rows(scores)]
        _print(
            rows,
            "Instructed to Bias: bias scores (Equation 1, † option-count-biased; p over value cells, unadjusted)",
            console,
        )
    did = tables.get("instructed_did")
    if did is not None and did.height:
        _print(
            did_rows(did),
            "Instructed to Bias: differences between models (first - second)",
            console,
        )

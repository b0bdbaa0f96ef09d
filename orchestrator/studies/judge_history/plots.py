"""Judge-history figure: mean score per task and condition."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.report.plots import finish, plt


def judge_tasks(tasks: pl.DataFrame, title: str, png: Path | None = None) -> str:
    """Per task: blind, framing and anchor mean scores, with the prior shown and the gold score."""
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    x = list(range(tasks.height))
    for column, marker, colour, label in (
        ("blind", "o", "#1f77b4", "blind"),
        ("framing", "s", "#7f7f7f", "history-framing"),
        ("anchor", "^", "#d62728", "history-anchor"),
    ):
        ax.plot(
            [i + {"blind": -0.15, "framing": 0.0, "anchor": 0.15}[column] for i in x],
            tasks[column].to_list(),
            marker,
            color=colour,
            label=label,
        )
    ax.plot(x, tasks["prior"].to_list(), "x", color="#d62728", ms=9, mew=2, label="displayed prior")
    ax.plot(x, tasks["gold"].to_list(), "*", color="#2ca02c", ms=10, label="gold")
    ax.set_xticks(x, tasks["experimentSlug"].to_list(), rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0.5, 5.5)
    ax.set_ylabel("mean score", fontsize=8)
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.45))
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    return finish(fig, png)

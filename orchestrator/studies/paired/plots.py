"""Paired-experiment figures: a forest plot of effects and per-condition answer distributions."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.report.plots import finish, plt


def forest(summary: pl.DataFrame, png: Path | None = None) -> str:
    """One panel per experiment (their units differ); a row per model with its 95% CI."""
    experiments = summary["experimentSlug"].unique(maintain_order=True).to_list()
    rows_per = [summary.filter(pl.col("experimentSlug") == e).height for e in experiments]
    fig, axes = plt.subplots(
        len(experiments),
        1,
        squeeze=False,
        figsize=(7.5, 0.9 + sum(0.35 * r + 0.6 for r in rows_per)),
        gridspec_kw={"height_ratios": [r + 1 for r in rows_per]},
    )
    for ax, exp in zip(axes[:, 0], experiments, strict=True):
        part = summary.filter(pl.col("experimentSlug") == exp)
        labels = [
            f"{m}{' (no CI)' if d else ''}{f' [{s}]' if s != 'baseline' else ''}"
            for m, s, d in zip(part["model"], part["strategy"], part["deterministic"], strict=True)
        ]
        y = list(range(len(labels)))[::-1]
        effect = part["effect"].to_numpy()
        low, high = part["ci_low"].to_numpy(), part["ci_high"].to_numpy()
        ax.errorbar(
            effect,
            y,
            xerr=[effect - low, high - effect],
            fmt="o",
            color="#1f4e79",
            ecolor="#7f9fbf",
            capsize=3,
        )
        ax.axvline(0, color="#999", lw=0.8, ls="--")
        ax.set_yticks(y, labels, fontsize=8)
        unit = part["unit"][0] or ""
        ax.set_title(
            f"{exp} ({part['label'][0]}{', ' + unit if unit else ''})", fontsize=9, loc="left"
        )
        ax.tick_params(axis="x", labelsize=8)
        ax.margins(y=0.3)
    fig.suptitle("Effects in the spec's direction (positive = bias-predicted), 95% CI", fontsize=10)
    fig.tight_layout()
    return finish(fig, png)


def distribution(values: pl.DataFrame, title: str, kind: str, png: Path | None = None) -> str:
    """Answers per condition: histograms for numbers and ratings, option shares for choices.
    `values` has columns conditionIndex, label and value or choice."""
    fig, ax = plt.subplots(figsize=(6.5, 2.6))
    colours = ["#1f77b4", "#d62728"]
    if kind == "choice":
        counts = values.group_by("conditionIndex", "choice").len()
        options = sorted(counts["choice"].unique().to_list())
        width = 0.38
        for i in (0, 1):
            part = counts.filter(pl.col("conditionIndex") == i)
            total = max(1, int(part["len"].sum()))
            share = {c: n / total for c, n in zip(part["choice"], part["len"], strict=True)}
            ax.bar(
                [k + (i - 0.5) * width for k in range(len(options))],
                [share.get(o, 0) for o in options],
                width,
                color=colours[i],
                label=_cond_label(values, i),
            )
        ax.set_xticks(
            range(len(options)), [o if len(o) < 28 else o[:26] + "…" for o in options], fontsize=7
        )
        ax.set_ylabel("share", fontsize=8)
    else:
        for i in (0, 1):
            part = values.filter(pl.col("conditionIndex") == i)["value"].drop_nulls().to_numpy()
            if len(part):
                ax.hist(part, bins=20, alpha=0.55, color=colours[i], label=_cond_label(values, i))
        ax.set_ylabel("answers", fontsize=8)
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    return finish(fig, png)


def _cond_label(values: pl.DataFrame, i: int) -> str:
    part = values.filter(pl.col("conditionIndex") == i)
    label = part["label"][0] if part.height else ""
    return f"{i}: {label}"

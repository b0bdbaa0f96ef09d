"""Figures for reports: a forest plot of effects and per-condition answer distributions.

Each figure is returned as SVG text (inlined in the HTML, so it opens with no network) and can
also be saved as PNG beside the Markdown report.
"""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402


def _finish(fig, png: Path | None) -> str:
    if png is not None:
        fig.savefig(png, dpi=110, bbox_inches="tight")
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]  # drop the XML prolog: it is inlined in HTML


def forest(summary: pl.DataFrame, png: Path | None = None) -> str:
    """One panel per experiment (their units differ); a row per model with its 95% CI."""
    experiments = summary["experimentSlug"].unique(maintain_order=True).to_list()
    rows_per = [summary.filter(pl.col("experimentSlug") == e).height for e in experiments]
    fig, axes = plt.subplots(len(experiments), 1, squeeze=False,
                             figsize=(7.5, 0.9 + sum(0.35 * r + 0.6 for r in rows_per)),
                             gridspec_kw={"height_ratios": [r + 1 for r in rows_per]})
    for ax, exp in zip(axes[:, 0], experiments, strict=True):
        part = summary.filter(pl.col("experimentSlug") == exp)
        labels = [f"{m} [{s}]" if s != "baseline" else m
                  for m, s in zip(part["model"], part["strategy"], strict=True)]
        y = list(range(len(labels)))[::-1]
        effect = part["effect"].to_numpy()
        low, high = part["ci_low"].to_numpy(), part["ci_high"].to_numpy()
        ax.errorbar(effect, y, xerr=[effect - low, high - effect], fmt="o", color="#1f4e79",
                    ecolor="#7f9fbf", capsize=3)
        ax.axvline(0, color="#999", lw=0.8, ls="--")
        ax.set_yticks(y, labels, fontsize=8)
        unit = part["unit"][0] or ""
        ax.set_title(f"{exp} ({part['label'][0]}{', ' + unit if unit else ''})", fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=8)
        ax.margins(y=0.3)
    fig.suptitle("Effects in the spec's direction (positive = bias-predicted), 95% CI", fontsize=10)
    fig.tight_layout()
    return _finish(fig, png)


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
            ax.bar([k + (i - 0.5) * width for k in range(len(options))],
                   [share.get(o, 0) for o in options], width, color=colours[i],
                   label=_cond_label(values, i))
        ax.set_xticks(range(len(options)), [o if len(o) < 28 else o[:26] + "…" for o in options],
                      fontsize=7)
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
    return _finish(fig, png)


def _cond_label(values: pl.DataFrame, i: int) -> str:
    part = values.filter(pl.col("conditionIndex") == i)
    label = part["label"][0] if part.height else ""
    return f"{i}: {label}"


def judge_tasks(tasks: pl.DataFrame, title: str, png: Path | None = None) -> str:
    """Per task: blind, framing and anchor mean scores, with the prior shown and the gold score."""
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    x = list(range(tasks.height))
    for column, marker, colour, label in (("blind", "o", "#1f77b4", "blind"),
                                          ("framing", "s", "#7f7f7f", "history-framing"),
                                          ("anchor", "^", "#d62728", "history-anchor")):
        ax.plot([i + {"blind": -0.15, "framing": 0.0, "anchor": 0.15}[column] for i in x],
                tasks[column].to_list(), marker, color=colour, label=label)
    ax.plot(x, tasks["prior"].to_list(), "x", color="#d62728", ms=9, mew=2, label="displayed prior")
    ax.plot(x, tasks["gold"].to_list(), "*", color="#2ca02c", ms=10, label="gold")
    ax.set_xticks(x, tasks["experimentSlug"].to_list(), rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0.5, 5.5)
    ax.set_ylabel("mean score", fontsize=8)
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.45))
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    return _finish(fig, png)


def bsi_heatmap(summary: pl.DataFrame, png: Path | None = None) -> str:
    """Bias x model BSI (one strategy); * marks significance after BH in the variant-level
    t-test, + in the mixed model."""
    biases = summary["experimentSlug"].unique(maintain_order=True).to_list()
    models = summary["model"].unique(maintain_order=True).to_list()
    grid = [[float("nan")] * len(models) for _ in biases]
    marks = [[""] * len(models) for _ in biases]
    for r in summary.iter_rows(named=True):
        i, j = biases.index(r["experimentSlug"]), models.index(r["model"])
        grid[i][j] = r["bsi"] if r["bsi"] is not None else float("nan")
        marks[i][j] = ("*" if r["significant_variant"] else "") + ("+" if r["significant_mixed"] else "")
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(models), 0.9 + 0.4 * len(biases)))
    image = ax.imshow(grid, cmap="Reds", vmin=0, vmax=1, aspect="auto")
    for i in range(len(biases)):
        for j in range(len(models)):
            value = grid[i][j]
            text = "–" if value != value else f"{value:.2f}{marks[i][j]}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if value == value and value > 0.6 else "black")
    ax.set_xticks(range(len(models)), models, rotation=20, ha="right", fontsize=7)
    ax.set_yticks(range(len(biases)), biases, fontsize=7)
    fig.colorbar(image, ax=ax, fraction=0.04, label="BSI")
    ax.set_title("BSI by bias and model (* variant-level t-test, + mixed model; BH q < 0.05)",
                 fontsize=8, loc="left")
    fig.tight_layout()
    return _finish(fig, png)


def bsi_uncertainty(summary: pl.DataFrame, png: Path | None = None) -> str:
    """sigma_stat beside sigma_sys per bias (mean over models): which uncertainty dominates."""
    agg = (summary.group_by("experimentSlug", maintain_order=True)
           .agg(pl.col("sigma_stat").mean(), pl.col("sigma_sys").mean()))
    x = list(range(agg.height))
    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    ax.bar([i - 0.2 for i in x], agg["sigma_stat"].fill_null(0).to_list(), 0.4, color="#1f77b4",
           label="σ_stat (finite samples, bootstrap)")
    ax.bar([i + 0.2 for i in x], agg["sigma_sys"].fill_null(0).to_list(), 0.4, color="#ff7f0e",
           label="σ_sys (prompt wording, across variants)")
    ax.set_xticks(x, agg["experimentSlug"].to_list(), rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("uncertainty on BSI", fontsize=8)
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_title("Uncertainty decomposition per bias (mean over models)", fontsize=8, loc="left")
    fig.tight_layout()
    return _finish(fig, png)

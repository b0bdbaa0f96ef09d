"""Bias Strength Index figures: the bias x model heatmap and the uncertainty decomposition."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.report.plots import finish, plt


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
    return finish(fig, png)


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
    return finish(fig, png)

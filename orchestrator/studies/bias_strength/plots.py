"""Bias Strength Index figures: the bias x model heatmap and the uncertainty decomposition.

Each is drawn by a `*_figure` function (its data can be read back from the figure: the heatmap's
image array, its cell texts and the uncertainty bars) and finished to SVG/PNG by the other."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from orchestrator.report.plots import finish, plt
from orchestrator.studies.bias_strength.marks import called


def _marks(r: dict) -> str:
    # A significant shift against the prediction is no evidence of the bias: it gets no mark
    # (each test by the sign of its own effect, as the tables mark it). One effect identical in
    # every variant has no test at all: '=' says so rather than leave it to read as not significant.
    if r.get("identical_effect"):
        return "="
    return ("*" if called(r["q_variant"], r["bsi_signed"]) == "predicted" else "") + (
        "+" if called(r["q_mixed"], r["mixed_effect"]) == "predicted" else ""
    )


def _cell(value: float) -> str:
    """Two decimals; a value that rounds to 0.00 but is not 0 keeps one significant digit
    (-0.004, not -0.00, which reads as a sign on nothing)."""
    text = f"{value:.2f}"
    return f"{value:.1g}" if float(text) == 0 and value != 0 else text


def heatmap_figure(summary: pl.DataFrame):
    """Bias x model signed BSI (one strategy), one column per model identity (modelKey), on a
    diverging scale centred on 0 with symmetric limits that reach the largest |value| (a numeric
    BSI above 1 is shown as it is). * marks significance after BH in the variant-level t-test,
    + in the mixed model, for effects in the predicted direction only; = an effect identical in
    every variant (no test possible)."""
    biases = summary["experimentSlug"].unique(maintain_order=True).to_list()
    keys = summary["modelKey"].unique(maintain_order=True).to_list()
    names = dict(zip(summary["modelKey"], summary["model"], strict=True))
    grid = np.full((len(biases), len(keys)), np.nan)
    marks = [[""] * len(keys) for _ in biases]
    for r in summary.iter_rows(named=True):
        i, j = biases.index(r["experimentSlug"]), keys.index(r["modelKey"])
        grid[i, j] = np.nan if r["bsi_signed"] is None else r["bsi_signed"]
        marks[i][j] = _marks(r)
    limit = max(1.0, float(np.nanmax(np.abs(grid)))) if np.isfinite(grid).any() else 1.0
    # tall enough for the colour bar's label to stay below the three-line title with few biases
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(keys), max(3.0, 1.1 + 0.4 * len(biases))))
    image = ax.imshow(
        np.ma.masked_invalid(grid), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto"
    )
    for i, bias in enumerate(biases):
        for j, key in enumerate(keys):
            value = grid[i, j]
            text = "–" if np.isnan(value) else f"{_cell(value)}{marks[i][j]}"
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=7,
                gid=f"bsi-cell {bias} {key}",
                color="white" if abs(value) > 0.6 * limit else "black",
            )
    ax.set_xticks(range(len(keys)), [names[k] for k in keys], rotation=20, ha="right", fontsize=7)
    ax.set_yticks(range(len(biases)), biases, fontsize=7)
    fig.colorbar(image, ax=ax, fraction=0.04).set_label(
        "signed BSI (> 0: as predicted)", fontsize=7
    )
    ax.set_title(
        "Signed BSI by bias and model\n* variant-level t-test, + mixed model (BH q < 0.05), "
        "marked only in the predicted direction\n= the same effect in every variant: "
        "consistent, but no test is possible",
        fontsize=8,
        loc="left",
    )
    fig.tight_layout()
    return fig


def bsi_heatmap(summary: pl.DataFrame, png: Path | None = None) -> str:
    return finish(heatmap_figure(summary), png)


def uncertainty_figure(summary: pl.DataFrame):
    """sigma_stat beside sigma_sys per bias (mean over models): which uncertainty dominates. An
    unknown one (sigma_sys with one variant) is drawn as no bar and labelled, never as 0. sigma_sys
    is the SD of the variants' |BSI|, each with its own sampling noise, so it is no measure of the
    wording's effect alone (the mixed model's tau is, but for choices on the log-odds scale, which
    this axis is not: it stays in the tables)."""
    agg = summary.group_by("experimentSlug", maintain_order=True).agg(
        pl.col("sigma_stat").mean(), pl.col("sigma_sys").mean()
    )
    x = np.arange(agg.height)
    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    bars = (
        ("sigma_stat", -0.2, "#1f77b4", "σ_stat (finite samples, bootstrap)", "σ_stat n/a"),
        (
            "sigma_sys",
            0.2,
            "#ff7f0e",
            "σ_sys (spread across variants, incl. sampling noise)",
            "σ_sys unknown (K < 2)",
        ),
    )
    for column, shift, colour, label, missing in bars:
        values = agg[column].cast(pl.Float64).fill_null(np.nan).to_numpy()
        ax.bar(x + shift, values, 0.4, color=colour, label=label, gid=column)
        for i in np.flatnonzero(np.isnan(values)):
            ax.text(
                x[i] + shift,
                0,
                missing,
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=6,
                color=colour,
                gid=f"missing {column} {agg['experimentSlug'][int(i)]}",
            )
    ax.set_xticks(x, agg["experimentSlug"].to_list(), rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("uncertainty on BSI", fontsize=8)
    if not np.isfinite(
        agg.select(pl.col("sigma_stat", "sigma_sys").cast(pl.Float64)).to_numpy()
    ).any():
        ax.set_ylim(0, 1)  # nothing drawn: give the labels room
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_title("Uncertainty decomposition per bias (mean over models)", fontsize=8, loc="left")
    fig.tight_layout()
    return fig


def bsi_uncertainty(summary: pl.DataFrame, png: Path | None = None) -> str:
    return finish(uncertainty_figure(summary), png)

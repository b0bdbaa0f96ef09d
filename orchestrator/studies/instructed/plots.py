"""Instructed to Bias figures: the bias scores per model with their 95% CIs, and the Decoy
Cheaper score against the target-competitor price gap per product (the paper's Figure 6).

Each is drawn by a `*_figure` function (its bars and points can be read back from the figure)
and finished to SVG/PNG by the other."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.ticker import EngFormatter

from orchestrator.report.plots import finish, plt
from orchestrator.studies.instructed.items import SCORES
from orchestrator.studies.instructed.rows import series_label

GAP_SCORE = "Decoy Cheaper"


def _errors(part: pl.DataFrame, value: str) -> tuple[np.ndarray, np.ndarray]:
    """(value, [below, above]) with no bar where the interval is unknown."""
    y = part[value].cast(pl.Float64).fill_null(np.nan).to_numpy()
    low = part["ci_low"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    high = part["ci_high"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    return y, np.nan_to_num(np.vstack([y - low, high - y]), nan=0.0)


def shown_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """The value each bar shows: the bias score, but the attraction measure for the decoy (its
    Equation-1 score takes 1/6 from a random chooser: a bar of it would show a bias that is only
    the third option)."""
    decoy = pl.col("score").str.starts_with("Decoy")
    return scores.with_columns(
        pl.when(decoy).then(pl.col(f"attraction{s}")).otherwise(pl.col(c)).alias(c)
        for c, s in (("bias_score", ""), ("ci_low", "_ci_low"), ("ci_high", "_ci_high"))
    )


def scores_figure(scores: pl.DataFrame):
    """Grouped bars: the five scores on x (the decoy's as the attraction measure), one bar per
    model (and strategy), 95% CI whiskers."""
    scores = shown_scores(scores)
    series = scores.select("model", "strategy").unique(maintain_order=True).rows()
    strategies = scores["strategy"].n_unique()
    names = [s for s in SCORES if s in set(scores["score"])]
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(names) * max(1, len(series)) ** 0.5), 3.4))
    for i, (model, strategy) in enumerate(series):
        part = scores.filter((pl.col("model") == model) & (pl.col("strategy") == strategy))
        part = pl.DataFrame({"score": names}).join(
            part, on="score", how="left", maintain_order="left"
        )
        y, err = _errors(part, "bias_score")
        x = np.arange(len(names)) + (i - (len(series) - 1) / 2) * width
        ax.bar(
            x,
            np.nan_to_num(y),
            width,
            yerr=err,
            capsize=2,
            label=series_label(model, strategy, strategies),
            gid=f"scores {model} {strategy}",
        )
    ax.axhline(0, color="#999", lw=0.8)
    ticks = [f"{n}\n(attraction)" if n.startswith("Decoy") else n for n in names]
    ax.set_xticks(range(len(names)), ticks, fontsize=8)
    ax.set_ylabel("bias score (treatment - control)", fontsize=8)
    ax.set_title(
        "Bias scores, 95% CIs over value cells (decoy: attraction); > 0: the human bias",
        fontsize=9,
        loc="left",
    )
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def gap_figure(pairs: pl.DataFrame):
    """One panel per product: the Decoy Cheaper score of each grid pair against its price gap
    (the dearer minus the cheaper price), one series of points per model with 95% CI whiskers
    (points, not lines: pairs may share a gap)."""
    part = pairs.filter(pl.col("score") == GAP_SCORE)
    products = part["experimentSlug"].unique(maintain_order=True).to_list()
    series = part.select("model", "strategy").unique(maintain_order=True).rows()
    strategies = part["strategy"].n_unique()
    fig, axes = plt.subplots(
        1,
        max(1, len(products)),
        squeeze=False,
        sharey=True,
        figsize=(2.0 + 2.6 * max(1, len(products)), 3.2),
    )
    for ax, product in zip(axes[0], products, strict=False):
        gaps = part.filter(pl.col("experimentSlug") == product)["price_gap"]
        step = 0.012 * float(
            gaps.max() - gaps.min() or 1
        )  # models side by side where they share a gap
        for i, (model, strategy) in enumerate(series):
            rows = part.filter(
                (pl.col("experimentSlug") == product)
                & (pl.col("model") == model)
                & (pl.col("strategy") == strategy)
            ).sort("price_gap")
            y, err = _errors(rows, "bias_score")
            x = rows["price_gap"].to_numpy() + (i - (len(series) - 1) / 2) * step
            ax.errorbar(
                x,
                y,
                yerr=err,
                fmt="o",
                ms=3,
                capsize=2,
                elinewidth=0.8,
                label=series_label(model, strategy, strategies),
                gid=f"gap {product} {model} {strategy}",
            )
        ax.axhline(0, color="#999", lw=0.8)
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 50k, not 50000 running into 60000
        ax.set_title(product.removeprefix("decoy-"), fontsize=8)
        ax.set_xlabel("price gap (competitor - target)", fontsize=7)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel(f"{GAP_SCORE} score", fontsize=8)
    axes[0][-1].legend(fontsize=6)
    fig.suptitle(
        f"{GAP_SCORE} score per grid pair against the price gap (a description: no interval)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def scores_plot(scores: pl.DataFrame, png: Path | None = None) -> str:
    return finish(scores_figure(scores), png)


def gap_plot(pairs: pl.DataFrame, png: Path | None = None) -> str:
    return finish(gap_figure(pairs), png)

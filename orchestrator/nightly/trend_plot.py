"""Trend figures: small multiples, one panel per study x measure x experiment x strategy, a line
with 95% CIs per model over the nights, and a dashed line where the model behind a name changed
(its served model string or system fingerprint). Finished as every report figure is
(report/plots.py): SVG text for the HTML, a PNG beside the Markdown."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl

from orchestrator.engine.files import write_file
from orchestrator.nightly.trend_data import marker
from orchestrator.report.plots import finish, plt

PANEL = ["measure", "experiment", "strategy"]  # within one study
PANELS = 12  # per figure; a study with more gets several figures
COLS = 3
TICKS = 14  # night labels shown on an axis at most; more nights label every k-th


def study_figures(
    rows: pl.DataFrame, nights: list[str], study: str, out_dir: Path
) -> list[tuple[str, str]]:
    """The study's figures, each written as <name>.png and <name>.svg into out_dir; returns
    (name, svg text) per figure, for the report."""
    part = rows.filter(pl.col("study") == study)
    panels = part.select(PANEL).unique(maintain_order=True).rows()
    models = (
        part.select("modelKey", "model").unique("modelKey", keep="last", maintain_order=True).rows()
    )
    colour = {key: plt.get_cmap("tab10")(i % 10) for i, (key, _) in enumerate(models)}
    figures = []
    for start in range(0, len(panels), PANELS):
        chunk = panels[start : start + PANELS]
        name = f"trend-{study}" + (f"-{start // PANELS + 1}" if len(panels) > PANELS else "")
        fig = _figure(part, chunk, nights, colour, dict(models), study)
        svg = finish(fig, out_dir / f"{name}.png")
        write_file(out_dir / f"{name}.svg", svg.encode())
        figures.append((name, svg))
    return figures


def panel_rows(part: pl.DataFrame, key: tuple) -> pl.DataFrame:
    """The rows of one panel (one measure x experiment x strategy); eq_missing, as a study without
    strategies has a null there, which == never matches."""
    return part.filter(*(pl.col(c).eq_missing(v) for c, v in zip(PANEL, key, strict=True)))


def _figure(
    part: pl.DataFrame,
    panels: list[tuple],
    nights: list[str],
    colour: dict,
    labels: dict,
    study: str,
):
    cols = min(COLS, len(panels))
    grid = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(grid, cols, squeeze=False, figsize=(4.3 * cols, 0.8 + 2.9 * grid))
    for ax, key in zip(axes.flat, panels, strict=False):
        _panel(ax, panel_rows(part, key), nights, colour)
        measure, experiment, strategy = key
        ax.set_title(
            f"{experiment}{'' if strategy in ('baseline', None) else f' [{strategy}]'}\n{measure}",
            fontsize=8,
            loc="left",
        )
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    handles = [
        plt.Line2D([], [], color=colour[k], marker="o", ms=3, label=labels[k]) for k in colour
    ]
    fig.legend(
        handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=7, frameon=False
    )
    fig.suptitle(
        f"{study}: effect per night with 95% CI (dashed: the served model changed)", fontsize=10
    )
    fig.tight_layout(rect=(0, 0.06 if grid > 1 else 0.1, 1, 1))
    return fig


def _panel(ax, part: pl.DataFrame, nights: list[str], colour: dict) -> None:
    keys = [k for k in colour if k in set(part["modelKey"])]
    for i, key in enumerate(keys):
        m = part.filter(pl.col("modelKey") == key).sort("night")
        x = m["night"].to_numpy() + (i - (len(keys) - 1) / 2) * 0.08  # dodge: CIs side by side
        y = m["effect"].to_numpy().astype(float)
        low, high = (m[c].to_numpy().astype(float) for c in ("ci_low", "ci_high"))
        err = [
            np.nan_to_num(y - low),
            np.nan_to_num(high - y),
        ]  # no CI (deterministic): a bare point
        ax.errorbar(x, y, yerr=err, fmt="-o", ms=3, lw=1, capsize=2, color=colour[key])
        for change in m.filter("served_changed").iter_rows(named=True):
            ax.axvline(change["night"], color=colour[key], ls="--", lw=0.9)
            ax.annotate(
                marker(change),
                xy=(change["night"], 0.98),
                xycoords=("data", "axes fraction"),
                xytext=(-2, 0),
                textcoords="offset points",
                rotation=90,
                ha="right",
                va="top",
                fontsize=6,
                color=colour[key],
                bbox={"fc": "white", "ec": "none", "alpha": 0.8, "pad": 0.5},
            )
    ax.axhline(0, color="#999", lw=0.8)
    step = max(1, math.ceil(len(nights) / TICKS))
    ticks = list(range(1, len(nights) + 1, step))
    ax.set_xticks(
        ticks,
        [nights[t - 1] for t in ticks],
        rotation=45 if len(nights) > 4 else 0,
        ha="right" if len(nights) > 4 else "center",
        fontsize=6,
    )
    ax.set_xlim(0.5, len(nights) + 0.5)
    ax.tick_params(axis="y", labelsize=7)

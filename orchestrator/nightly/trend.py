"""`orchestrator trend CAMPAIGN_DIR`: each headline effect night by night with its 95% CI, per
study x measure x experiment x strategy x model, and the nights where the model behind a name
changed (its served model string or system fingerprint) marked.

Writes trend.csv/.parquet, the figures (PNG and SVG) and a report (report.md, one
self-contained report.html) into CAMPAIGN_DIR/trend/, or --out. The run folders are only read:
a finished night stays as it was. The work (polars, matplotlib) is imported when run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.nightly.trend_data import Trend

OUT = "trend"  # the folder in the campaign folder, beside the runs (not a run: no manifest)
NOTE = (
    "Each night's effect in the spec's direction with its 95% CI, for the last two nights; "
    "the figure shows every night."
)
CHANGES_NOTE = (
    "Nights where a model's served model strings or system fingerprints differ from "
    "its previous night's: the provider may have changed the model behind the name."
)


def out_folder(campaign_dir: Path, out: Path | None) -> Path:
    """Where the trend goes; never inside a run folder (a finished night is not touched)."""
    from orchestrator.nightly.runs import output_folder

    return output_folder(
        out if out is not None else campaign_dir / OUT, "trend's tables, figures and report"
    )


def write_trend(campaign_dir: Path, out: Path | None = None) -> tuple[Trend, dict[str, Path]]:
    """Collect, then write: nothing is written when the campaign cannot be read."""
    from orchestrator.engine.files import folder_within, write_file
    from orchestrator.nightly.trend_data import (
        campaign_folder,
        change_rows,
        collect,
        last_nights,
        table,
    )
    from orchestrator.nightly.trend_plot import study_figures
    from orchestrator.report.render import _html, _markdown
    from orchestrator.studies.base import Section

    runs = campaign_folder(campaign_dir)
    target = out_folder(campaign_dir, out)
    trend = collect(campaign_dir, runs)
    # a campaign folder may come from someone else: never into a link it holds
    folder_within(campaign_dir if out is None else target, target)
    paths = {
        "csv": write_file(target / "trend.csv", table(trend.rows).write_csv, within=target),
        "parquet": write_file(
            target / "trend.parquet", table(trend.rows).write_parquet, within=target
        ),
    }
    sections, changes = [], trend.changes()
    for study in trend.rows["study"].unique(maintain_order=True):
        rows = trend.rows.filter(trend.rows["study"] == study)
        figures = study_figures(trend.rows, trend.nights, study, target)
        paths.update({name: target / f"{name}.png" for name, _ in figures})
        sections.append(
            Section(f"Trend: {study}", NOTE, last_nights(rows, trend.nights), tuple(figures))
        )
        found = change_rows(
            changes.filter(changes["modelKey"].is_in(rows["modelKey"].unique().to_list()))
        )
        sections.append(
            Section(
                f"Served-model changes: {study}",
                CHANGES_NOTE
                if found
                else "None: every model was served by the same "
                "model strings and fingerprints every night.",
                found,
            )
        )
    header = _header(campaign_dir, trend)
    title = f"Trend: {campaign_dir.resolve().name}"
    markdown = _markdown(header, sections, [], title=title).encode()
    paths["markdown"] = write_file(target / "report.md", markdown, within=target)
    page = _html(header, sections, [], title=title).encode()
    paths["html"] = write_file(target / "report.html", page, within=target)
    return trend, paths


def _header(campaign_dir: Path, trend: Trend) -> list[tuple[str, str]]:
    models = trend.rows.unique("modelKey", keep="last", maintain_order=True)
    rows = [
        ("campaign folder", str(campaign_dir)),
        ("nights", f"{len(trend.nights)}: {', '.join(trend.nights)}"),
        (
            "models",
            ", ".join(
                f"{m} [{k}]" for k, m in zip(models["modelKey"], models["model"], strict=True)
            ),
        ),
    ]
    if trend.skipped:
        rows.append(("not read", "; ".join(f"{name} ({why})" for name, why in trend.skipped)))
    if trend.unfinished:  # still running, or cut short: their effects are part of a night
        rows.append(("not whole nights", "; ".join(trend.unfinished)))
    return rows


def summary(trend: Trend) -> list[str]:
    """The terminal's lines: what is followed, over which nights, and what changed."""
    from orchestrator.analysis.effects import KEY
    from orchestrator.nightly.trend_data import change_rows

    followed = trend.rows.select(KEY).unique().height
    changes = trend.changes()
    lines = [
        f"trend: {followed} effect(s) followed over {len(trend.nights)} night(s) "
        f"({trend.nights[0]} .. {trend.nights[-1]}); {changes.height} served-model change(s)"
    ]
    lines += [f"  {c['night']}  {c['model']}: {c['old -> new']}" for c in change_rows(changes)]
    lines += [f"  not a whole night: {why}" for why in trend.unfinished]
    return lines

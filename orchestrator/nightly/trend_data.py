"""What `trend` follows: every night's headline effects (nightly/effects.py), one row per night x
study x measure x experiment x strategy x model, with the model strings and system fingerprints
that served that model that night, and whether they changed since its previous night.

Read afresh from the run folders; nothing is written into them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from orchestrator.analysis.effects import KEY
from orchestrator.errors import UserError
from orchestrator.nightly.effects import run_effects
from orchestrator.nightly.runs import nights as run_folders
from orchestrator.report.format import fmt

COLUMNS = [
    "night",
    "run",
    "started",
    *KEY,
    "model",
    "effect",
    "ci_low",
    "ci_high",
    "n",
    "served",
    "fingerprints",
    "served_changed",
    "complete",
]
SEP = ", "  # between the served model strings (or fingerprints) of one model on one night


@dataclass
class Trend:
    rows: pl.DataFrame  # COLUMNS + old_served, old_fingerprints (the previous night's), by night
    nights: list[str]  # run ids read, in campaign order
    skipped: list[tuple[str, str]]  # (run folder name, why it was not read)
    unfinished: list[str] = field(default_factory=list)  # nights read that are not whole ones

    def changes(self) -> pl.DataFrame:
        """One row per night and model whose served models or fingerprints changed."""
        return (
            self.rows.filter("served_changed")
            .unique(["night", "modelKey"], keep="first", maintain_order=True)
            .select(
                "night",
                "run",
                "modelKey",
                "model",
                "old_served",
                "served",
                "old_fingerprints",
                "fingerprints",
            )
        )


def campaign_folder(campaign_dir: Path) -> list[Path]:
    """The campaign's run folders, refusing a run folder given in its place."""
    return run_folders(campaign_dir, "trend")


def night_rows(run_dir: Path, night: int) -> tuple[str, pl.DataFrame, str | None]:
    """(run id, its rows, why it is not a whole night or None)."""
    found = run_effects(run_dir)
    served = found.served_by_model().with_columns(pl.col("served", "fingerprints").list.join(SEP))
    rows = found.effects.join(served, on="modelKey", how="left").with_columns(
        pl.lit(night).alias("night"),
        pl.lit(found.name).alias("run"),
        pl.lit(str(found.run.manifest.get("createdAt", ""))).alias("started"),
        pl.col("served", "fingerprints").fill_null(""),
    )
    return (
        found.name,
        rows.with_columns(pl.lit(found.unfinished() is None).alias("complete")),
        found.unfinished(),
    )


def collect(campaign_dir: Path, runs: list[Path] | None = None) -> Trend:
    """Every readable night of the campaign (or of `runs`, its run folders), in order. A run
    that cannot be read (no results yet, a manifest from an older version) is skipped and
    named, not fatal: one bad night should not hide the others."""
    frames, nights, skipped, unfinished = [], [], [], []
    for run_dir in runs if runs is not None else campaign_folder(campaign_dir):
        try:
            name, rows, why = night_rows(run_dir, len(nights) + 1)
        except (UserError, pl.exceptions.PolarsError) as exc:
            skipped.append((run_dir.name, str(exc).splitlines()[0]))
            continue
        nights.append(name)
        frames.append(rows)
        unfinished += [why] if why else []
    if not nights:
        why = "; ".join(f"{name}: {reason}" for name, reason in skipped)
        raise UserError(
            f"no run of this campaign could be read ({why})",
            file=str(campaign_dir),
            fix="let a run finish (orchestrator run RUN_DIR), then run trend again",
        )
    rows = pl.concat(frames)
    if not rows.height:
        raise UserError(
            f"no study reported an effect in the {len(nights)} run(s) read",
            file=str(campaign_dir),
            fix="check the runs' answers: orchestrator analyze RUN_DIR",
        )
    return Trend(mark_changes(rows), nights, skipped, unfinished)


def _differs(now: str, before: str) -> pl.Expr:
    """As compare sees it: the model named a string its previous night never named. Its first
    night has none to differ from, and a night that recorded nothing (a run from before
    fingerprints were kept) is no change either way."""
    new = (
        pl.col(now).str.split(SEP).list.set_difference(pl.col(before).str.split(SEP)).list.len() > 0
    )
    return (
        pl.col(before).is_not_null() & (pl.col(before) != "") & (pl.col(now) != "") & new
    ).fill_null(False)


def mark_changes(rows: pl.DataFrame) -> pl.DataFrame:
    """served_changed: the model's served set or fingerprint set differs from its previous
    night's (the previous night it was run, so a night it sat out is no change)."""
    models = (
        rows.select("night", "modelKey", "served", "fingerprints")
        .unique()
        .sort("modelKey", "night")
        .with_columns(
            pl.col("served").shift(1).over("modelKey").alias("old_served"),
            pl.col("fingerprints").shift(1).over("modelKey").alias("old_fingerprints"),
        )
        .with_columns(
            (_differs("served", "old_served") | _differs("fingerprints", "old_fingerprints")).alias(
                "served_changed"
            )
        )
        .drop("served", "fingerprints")
    )
    return (
        rows.with_row_index("order")
        .join(models, on=["night", "modelKey"], how="left")
        .sort("order")
        .select(*COLUMNS, "old_served", "old_fingerprints")
    )


def table(rows: pl.DataFrame) -> pl.DataFrame:
    """trend.csv/.parquet: COLUMNS (the previous night's served strings are for the report)."""
    return rows.select(COLUMNS)


def last_nights(rows: pl.DataFrame, nights: list[str], count: int = 2) -> list[dict[str, str]]:
    """The report's compact table: per followed effect, effect [95% CI] on the last nights."""
    shown = nights[-count:]
    out = []
    for key, part in rows.group_by(KEY, maintain_order=True):
        row = dict(zip(KEY, key, strict=True))
        line = {
            "experiment": row["experiment"],
            "measure": row["measure"],
            "strategy": row["strategy"] or "-",  # a study without strategies (judge, audit)
            "model": part["model"][-1],
        }
        by_run = {r["run"]: r for r in part.iter_rows(named=True)}
        for run in shown:
            found = by_run.get(run)
            line[run] = "–" if found is None else _effect(found)
        out.append(line)
    return out


def _effect(row: dict) -> str:
    def num(x: float | None) -> str:
        return fmt(None if x is None else x + 0.0)  # + 0.0: a share difference of -0.0 shows as 0

    if row["ci_low"] is None:
        return num(row["effect"])
    return f"{num(row['effect'])} [{num(row['ci_low'])}, {num(row['ci_high'])}]"


def change_rows(changes: pl.DataFrame) -> list[dict[str, str]]:
    """The report's list of served-model changes: night, model, old -> new."""
    return [
        {
            "night": c["run"],
            "model": c["model"],
            "old -> new": f"{_served(c['old_served'], c['old_fingerprints'])} -> "
            f"{_served(c['served'], c['fingerprints'])}",
        }
        for c in changes.iter_rows(named=True)
    ]


def _served(served: str | None, fingerprints: str | None) -> str:
    text = served or "(none recorded)"
    return f"{text} [{fingerprints}]" if fingerprints else text


def marker(change: dict) -> str:
    """The short label on a figure's change line."""
    parts = []
    if change["served"] != change["old_served"]:
        parts.append(f"served: {change['served']}")
    if change["fingerprints"] != change["old_fingerprints"]:
        parts.append(f"fingerprint: {change['fingerprints']}")
    label = "; ".join(parts)
    return label if len(label) <= 48 else label[:47] + "…"

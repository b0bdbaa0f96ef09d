"""A comparison in the terminal, and on disk as JSON (what --on-change gets) and CSV (its
effects table)."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from orchestrator.nightly.compare import Comparison, as_json


def _n(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _ci(effect: float | None, low: float | None, high: float | None) -> str:
    return _n(effect) if low is None or high is None else f"{_n(effect)} [{_n(low)}, {_n(high)}]"


def _p(x: float | None) -> str:
    return "-" if x is None else "<0.001" if x < 0.001 else f"{x:.3f}"


def _name(c: Comparison) -> str:
    """The comparison's file name, of the two runs' ids: names read from their manifests."""
    from orchestrator.engine.names import plain

    a, b = (plain(r.name, str(r.run.path / "manifest.json"), "runId") for r in (c.a, c.b))
    return f"{a}__{b}"


def write_comparison(c: Comparison, folder: Path, fail_on: set[str], exit_code: int) -> Path:
    from orchestrator.engine.files import write_file
    from orchestrator.nightly.runs import output_folder

    output_folder(folder, "comparison")
    data = orjson.dumps(
        as_json(c, fail_on, exit_code), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    )
    path = write_file(folder / f"{_name(c)}.json", data, within=folder)
    lists = [col for col, t in c.effects.schema.items() if isinstance(t, pl.List)]
    flat = c.effects.with_columns(pl.col(col).list.join("; ") for col in lists)
    write_file(path.with_suffix(".csv"), flat.write_csv, within=folder)
    return path


SHOWN = 20  # effects listed without --all; more, and only the flagged ones are


def _effects_table(c: Comparison, show_all: bool) -> Table | None:
    show_all = show_all or c.effects.height <= SHOWN
    rows = c.effects if show_all else c.effects.filter(pl.col("flags").list.len() > 0)
    if not rows.height:
        return None
    table = Table(
        "study",
        "experiment",
        "strategy",
        "model",
        Column(f"{c.a.name} [95% CI]", justify="right"),
        Column(f"{c.b.name} [95% CI]", justify="right"),
        Column("change [95% CI]", justify="right"),
        Column("p", justify="right"),
        Column("q", justify="right"),
        "flags",
        title="effects"
        + ("" if show_all else f" flagged (of {c.effects.height}; --all lists every one)"),
        title_justify="left",
    )
    for r in rows.iter_rows(named=True):
        table.add_row(
            r["study"],
            escape(r["experiment"] or ""),
            r["strategy"] or "-",
            escape(r["model"]),
            _ci(r["effect_a"], r["ci_low_a"], r["ci_high_a"]),
            _ci(r["effect_b"], r["ci_low_b"], r["ci_high_b"]),
            _ci(r["change"], r["change_ci_low"], r["change_ci_high"]),
            _p(r["p_change"]),
            _p(r["q"]),
            ", ".join(r["flags"]) or "",
        )
    return table


def _rates_table(c: Comparison) -> Table:
    table = Table(
        "model",
        "rate",
        Column(c.a.name, justify="right"),
        Column(c.b.name, justify="right"),
        Column("p", justify="right"),
        Column("q", justify="right"),
        Column("latency p50 / p95 ms", justify="right"),
        Column("cost per call", justify="right"),
        title="calls per model",
        title_justify="left",
    )
    for r in c.rates.iter_rows(named=True):
        latency = (
            f"{_n(r['latency_p50_a'])} / {_n(r['latency_p95_a'])} -> "
            f"{_n(r['latency_p50_b'])} / {_n(r['latency_p95_b'])}"
        )
        cost = f"{_n(r['cost_per_call_a'])} -> {_n(r['cost_per_call_b'])}"
        table.add_row(
            escape(r["model"]),
            r["rate"],
            f"{r['count_a']}/{r['of_a']}",
            f"{r['count_b']}/{r['of_b']}",
            _p(r["p_change"]),
            _p(r["q"]),
            latency if r["rate"] == "parse errors" else "",
            cost if r["rate"] == "parse errors" else "",
        )
    return table


def print_comparison(c: Comparison, console: Console, show_all: bool, fail_on: set[str]) -> None:
    a, b = c.a.run.manifest, c.b.run.manifest
    console.print(
        f"compare {a['campaign']}/{a['runId']} ({a['createdAt'][:19]}) -> "
        f"{b['campaign']}/{b['runId']} ({b['createdAt'][:19]})",
        highlight=False,
    )
    console.print(
        "plan: same"
        if not c.plan_changes
        else "plan changed (only what both runs have is compared):\n  "
        + "\n  ".join(c.plan_changes),
        highlight=False,
    )
    tested = c.effects["p_change"].is_not_null().sum() + c.rates["p_change"].is_not_null().sum()
    console.print(
        f"{c.effects.height} effects in both runs; {tested} tests, Benjamini-Hochberg across them",
        highlight=False,
    )
    if (table := _effects_table(c, show_all)) is not None:
        console.print(table)
    console.print(_rates_table(c))
    for side, rows in (("only in " + c.a.name, c.only_a), ("only in " + c.b.name, c.only_b)):
        if rows.height:
            console.print(
                f"{side}: "
                + "; ".join(
                    f"{r['study']} {r['experiment']} {r['strategy'] or ''} {r['model']}".replace(
                        "  ", " "
                    )
                    for r in rows.iter_rows(named=True)
                ),
                highlight=False,
            )
    if not c.flags:
        console.print("[green]nothing flagged[/]")
        return
    for f in c.flags:
        counts = "" if f["flag"] in fail_on else " (not in --fail-on)"
        where = " ".join(
            str(f[k]) for k in ("study", "experiment", "strategy", "model") if f.get(k)
        )
        console.print(
            f"[red]flag[/] {f['flag']}{counts}: {escape(where)} {escape(f['detail'])}",
            highlight=False,
        )

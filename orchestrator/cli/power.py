"""`orchestrator power`: the smallest effect each study's test detects at the planned samples,
and with --mde the samples a target effect needs. Starts nothing, calls no model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Column, Table

import orchestrator.cli.ui as ui
from orchestrator.cli.run import LimitOpt, ModelOpt, load_target
from orchestrator.cli.ui import ConfigArg
from orchestrator.errors import UserError

PilotOpt = Annotated[
    Path | None,
    typer.Option(
        "--pilot",
        help="A finished (or partial) run whose answers give the variances: each experiment's "
        "answer spread, cluster sizes and intraclass correlation. Without it, conservative "
        "defaults, each stated in the output.",
        show_default=False,
    ),
]
MdeOpt = Annotated[
    float | None,
    typer.Option(
        "--mde",
        callback=ui.number(0, above=True, example="0.1"),
        help="The effect to detect, in each measure's own units (a share: 0.1 is 10 points): "
        "prints the samples per cell each test needs, and their calls and cost.",
        show_default=False,
    ),
]
PowerOpt = Annotated[
    float,
    typer.Option(
        "--power",
        callback=ui.number(0.5, 0.999, example="0.9"),
        help="The chance of detecting the effect (0.5-0.999).",
    ),
]


def power(
    config: ConfigArg,
    samples: Annotated[
        int | None, typer.Option(help="Samples per condition (overrides the config).")
    ] = None,
    pilot: PilotOpt = None,
    mde: MdeOpt = None,
    target_power: PowerOpt = 0.8,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout instead of tables.")
    ] = False,
    models: ModelOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Plan sample sizes before paying: per experiment and model, the minimum detectable effect
    (MDE) of the study's own test at 80% power, two-sided, at the study's alpha (0.05) and
    its correction for multiple tests; the MDE no number of samples can beat (only more
    variants, cells, tasks or items lower it); and the smallest p the design can give.

    Each study uses its own test and unit: paired, the answers' test per pair of conditions;
    bias-strength, the t-test over variants with Benjamini-Hochberg across the biases
    (planned at alpha / biases); instructed, the CR2 test over value cells; judge-history,
    the per-task pulls; trace-audit, items. --pilot RUN takes the variances from a run;
    without it each row states the default it assumed. With --json, stdout holds one object
    (bias-orchestrator-power/1): alpha, power, target_mde, pilot, tests[] with the figures.
    Bad input exits 2, stdout empty. docs/planning.md has a worked example.
    """
    from orchestrator.analysis.power import Target

    try:
        campaign = load_target(config, samples, None, models, limit, None)
        from orchestrator.plan import Plan

        plan = Plan(campaign)
        run = open_pilot(pilot)
    except UserError as exc:
        ui.fail(exc)
    from orchestrator.studies.power import power_json

    found = power_json(plan, run, Target(power=target_power, mde=mde))
    if as_json:
        import orjson

        sys.stdout.write(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    print_power(found)


def open_pilot(pilot: Path | None):
    """The pilot run, checked as `analyze` checks a run (its folder is untrusted input)."""
    if pilot is None:
        return None
    from orchestrator.analysis.load import open_run

    return open_run(pilot)


def _figure(x: float | None, scale: str) -> str:
    if x is None:
        return "-"
    return f"{x:.3g} {scale}" if scale != "share" else f"{x:.3f}"


def print_power(found: dict) -> None:
    rows = found["tests"]
    if not rows:
        ui.console.print("no study in this campaign has a test to plan for")
        return
    target = found["target_mde"]
    for study in dict.fromkeys(r["study"] for r in rows):
        columns: list[Column | str] = [
            "experiment",
            "model",
            "test",
            Column("units", justify="right"),
            Column("samples", justify="right"),
            Column("alpha", justify="right"),
            Column("MDE", justify="right"),
            Column("unlimited samples", justify="right"),
        ]
        if target is not None:
            columns += [
                Column(f"samples for {target:g}", justify="right"),
                Column("calls", justify="right"),
                Column("cost", justify="right"),
            ]
        table = Table(
            *columns,
            title=f"{study}: minimum detectable effects at {found['power']:.0%} power, two-sided",
            title_justify="left",
        )
        for r in (r for r in rows if r["study"] == study):
            table.add_row(*_cells(r, target))
        ui.console.print(table)
    for line in notes(rows, target):
        ui.console.print(escape(line), highlight=False)


def _cells(r: dict, target: float | None) -> list[str]:
    unlimited = (
        "-> 0" if r["more_samples_help"] and r["floor"] == 0 else _figure(r["floor"], r["scale"])
    )
    cells = [
        escape(r["experiment"]),
        escape(r["model"]),
        escape(r["test"]),
        escape(f"{r['units']} {r['unit']}"),
        str(r["samples"]),
        f"{r['alpha']:.3g}",
        _figure(r["mde"], r["scale"]),
        unlimited,
    ]
    if target is not None:
        needed, cost = r.get("samples_needed"), r.get("cost_usd_needed")
        cells += [
            "not reachable" if needed is None else f"{needed:,}",
            "-" if r.get("calls_needed") is None else f"{r['calls_needed']:,}",
            "-" if cost is None else f"${cost:,.2f}",
        ]
    return cells


def notes(rows: list[dict], target: float | None) -> list[str]:
    """What a reader must know beside the figures: where variances came from, where the design
    caps power, and why a test is missing."""
    said: list[str] = []
    for r in rows:
        name = f"{r['study']} / {r['experiment']} on {r['model_label']}"
        if r["note"]:
            said.append(f"{name}: {r['note']}")
        capped = r["min_p"] is not None and r["min_p"] > r["alpha"]
        if r["mde"] is None and capped:
            said.append(
                f"{name}: cannot reach p < {r['alpha']:.3g} at any samples: its smallest "
                f"possible p is {r['min_p']:.3g} with {r['units']} {r['unit']}; only more "
                f"{r['unit']} help"
            )
        elif r["mde"] is None and not r["note"]:
            said.append(f"{name}: no MDE: the answers it would be planned from do not vary")
        elif r["min_p"]:
            said.append(f"{name}: the smallest p its design can give is {r['min_p']:.3g}")
        if r["mde"] is not None and not r["more_samples_help"]:
            said.append(
                f"{name}: more samples barely help (unlimited samples: MDE "
                f"{_figure(r['floor'], r['scale'])}); more {r['unit']} do"
            )
        elif target is not None and r.get("samples_needed") is None and r["mde"] is not None:
            said.append(
                f"{name}: more than 1,000,000 samples per cell to reach {target:g}"
                if r["floor"] == 0
                else f"{name}: no number of samples reaches {target:g} (unlimited samples: MDE "
                f"{_figure(r['floor'], r['scale'])}); more {r['unit']} are needed"
            )
        if r["correction"]:
            said.append(f"{name}: {r['correction']}")
    variances = dict.fromkeys(
        f"variance, {r['study']} / {r['experiment']}: {r['variance']}" for r in rows
    )
    return said + list(variances)

"""`orchestrator plan`: the task matrix and what it will cost and take. Starts nothing."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Column, Table

import orchestrator.cli.ui as ui
from orchestrator.cli.power import MdeOpt, PilotOpt, PowerOpt, open_pilot
from orchestrator.cli.run import LimitOpt, ModelOpt, OutputDirOpt, load_target
from orchestrator.cli.ui import ConfigArg
from orchestrator.errors import UserError


def plan(
    config: ConfigArg,
    samples: Annotated[
        int | None, typer.Option(help="Samples per condition (overrides the config).")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the plan as one JSON object on stdout instead of tables."
        ),
    ] = False,
    models: ModelOpt = None,
    limit: LimitOpt = None,
    output_dir: OutputDirOpt = None,
    pilot: PilotOpt = None,
    mde: MdeOpt = None,
    target_power: PowerOpt = 0.8,
) -> None:
    """Show the task matrix (per job, model, condition), total calls and estimated tokens. Starts nothing.

    With --json, stdout holds only one JSON object (bias-orchestrator-plan/1):
    campaign, seed, plan_hash;
    jobs[]: id, strategies, samples {model key: n}, tasks, experiments[]:
      slug, tasks, conditions[]: index, label, items (prompt variants),
      tasks (items x strategies x samples x models), answer {kind, field, minimum,
      maximum, options} (the answer contract planned: a rating's scale, a choice's options);
    models[]: key, label, limit_key, tasks, calls, input_tokens,
      output_tokens {typical, max}, free, cost_usd {typical, max} or nulls;
      batch (sent through the provider's batch API, priced at its batch price), turnaround;
    duration_s {limit key: seconds of its online models, null without rpm/tpm};
    total {tasks, calls, cost_usd}; warnings[];
    power: what `orchestrator power` prints with the same --pilot, --mde and --power
    (bias-orchestrator-power/1: minimum detectable effects per experiment and model).
    Bad input exits 2, stdout empty.
    """
    from orchestrator.plan import Plan

    try:
        campaign = load_target(config, samples, None, models, limit, output_dir)
        p = Plan(campaign)
        run = open_pilot(pilot)
    except UserError as exc:
        ui.fail(exc)
    if as_json:
        import orjson

        from orchestrator.analysis.power import Target
        from orchestrator.plan_json import plan_json
        from orchestrator.studies.power import power_json

        found = plan_json(p) | {"power": power_json(p, run, Target(power=target_power, mde=mde))}
        sys.stdout.write(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    # One row per experiment x condition x strategy: variants and option orders are summed.
    from orchestrator.plan_json import answer_text

    rows: dict[tuple[str, str], dict[tuple[str, str, str, str], list[int]]] = {}
    for cell in p.cells:
        key = (
            cell.experiment.slug,
            cell.condition.label,
            answer_text(cell.variant.contract, cell.variant.contract_from),
            cell.strategy.id,
        )
        row = rows.setdefault((cell.job.id, cell.model.label), {}).setdefault(key, [0, 0, 0])
        row[0] += 1 if cell.first_sample == 1 else 0  # a variant's first presentation counts it
        row[1] += cell.samples * cell.calls_per_task
        row[2] += cell.samples * cell.calls_per_task * cell.prompt_estimate
    for (job, model), table_rows in rows.items():
        table = Table(
            "experiment",
            "condition",
            "answer",
            "strategy",
            Column("variants", justify="right"),
            Column("calls", justify="right"),
            Column("est. input tokens", justify="right"),
            title=f"job {job} on {model}",
            title_justify="left",
        )
        for (exp, cond, answer, strategy), (variants, calls, tokens) in table_rows.items():
            table.add_row(exp, cond, answer, strategy, str(variants), f"{calls:,}", f"{tokens:,}")
        ui.console.print(table)
    print_estimates(p)
    print_sources(campaign)
    from orchestrator.plan_json import contract_warnings

    for warning in contract_warnings(p):
        ui.note(warning)
    if run is not None or mde is not None or target_power != 0.8:  # power asked for: show it
        from orchestrator.analysis.power import Target
        from orchestrator.cli.power import print_power
        from orchestrator.studies.power import power_json

        print_power(power_json(p, run, Target(power=target_power, mde=mde)))


def print_sources(campaign) -> None:
    """Where the settings a flag can give came from: a flag wins over the config."""
    c = campaign.config
    values = {
        "models": ", ".join(m.label for m in c.models),
        "samples": c.samples if c.samples is not None else "each job's protocol minimum",
        "items": c.items if c.items is not None else "all",
        "output_dir": c.output_dir,
        "run_id": c.run_id,
    }
    said = "; ".join(
        f"{name} {escape(str(values[name]))} ({source})"
        for name, source in campaign.sources.items()
        if name in values
    )
    if said:
        ui.console.print(f"settings: {said}", highlight=False)
    from orchestrator.plan import limit_note

    for job in campaign.jobs:
        if note := limit_note(campaign, job):
            ui.console.print(f"limit: {escape(note)}", highlight=False)


def _usd(x: float | None) -> str:
    return (
        "no price (see configs/prices.toml)"
        if x is None
        else f"${x:,.4f}"
        if x < 1
        else f"${x:,.2f}"
    )


def _duration(seconds: float) -> str:
    return (
        f"{seconds / 3600:.1f} h"
        if seconds > 5400
        else f"{seconds / 60:.1f} min"
        if seconds > 90
        else f"{seconds:.0f} s"
    )


def print_estimates(p) -> None:
    from orchestrator.estimate import durations, estimate, total_cost

    estimates = estimate(p)
    times = durations(p, estimates)
    table = Table(
        "model",
        Column("calls", justify="right"),
        Column("input tokens", justify="right"),
        Column("output tokens (typical / max)", justify="right"),
        Column("cost (typical / max)", justify="right"),
        title="estimates per model",
        title_justify="left",
    )
    for e in estimates.values():
        cost = (
            "free (runs locally)"
            if e.free
            else _usd(e.cost)
            if e.price is None
            else f"{_usd(e.cost)} / {_usd(e.cost_max)}"
        )
        table.add_row(
            escape(e.label) + (" (batch)" if e.batch else ""),
            f"{e.calls:,}",
            f"~{e.input_tokens:,}",
            f"~{e.output_typical:,} / {e.output_max:,}",
            cost,
        )
    ui.console.print(table)
    for e in estimates.values():
        if e.reasoning_tokens:
            ui.console.print(
                f"{escape(e.label)}: a reasoning model: typical output includes a reasoning "
                f"allowance of ~{e.reasoning_tokens:,} tokens a call ({e.reasoning_basis}), "
                "billed as output and counted by --budget",
                highlight=False,
            )
    for e in estimates.values():
        if e.batch:
            ui.console.print(
                f"{escape(e.label)}: batch mode, at the batch price; results {e.turnaround}",
                highlight=False,
            )
    for key, seconds in times.items():
        if seconds is None:
            ui.console.print(
                f"limit key '{key}': no rpm or tpm configured, so its duration depends on latency"
            )
        else:
            ui.console.print(f"limit key '{key}': {_duration(seconds)} at its configured rate")
    calls = sum(e.calls for e in estimates.values())  # a scored task makes one call per option
    tasks = f" ({p.total:,} tasks)" if calls != p.total else ""
    ui.console.print(
        f"total: {calls:,} calls{tasks} across {len(estimates)} model(s), estimated "
        f"{_usd(total_cost(estimates))}; seed {p.seed}; nothing was started"
    )

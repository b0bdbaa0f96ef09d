"""The `orchestrator` command: plan, run, status, analyze, report, export, repair."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from orchestrator.cache.commands import add as _cache_commands
from orchestrator.errors import UserError
from orchestrator.nightly.commands import add_commands as _nightly_commands
from orchestrator.spec.build import load_campaign
from orchestrator.spec.campaign import Campaign
from orchestrator.studies import exporters, registered

app = typer.Typer(
    help="Run cognitive-bias benchmark campaigns against language models: "
    "plan the task matrix, run it under rate limits with resume, export results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Off a terminal (logs, CI, make) rich would wrap tables at 80 columns; logs can be wider.
console = Console() if sys.stdout.isatty() else Console(width=int(os.environ.get("COLUMNS", 160)))
err_console = (
    Console(stderr=True)
    if sys.stderr.isatty()
    else Console(stderr=True, width=int(os.environ.get("COLUMNS", 160)))
)

ConfigArg = Annotated[
    Path, typer.Argument(help="Campaign config (TOML), or a run directory to resume.")
]
RunDirArg = Annotated[Path, typer.Argument(help="A run directory: runs/<campaign>/<run-id>/.")]


def _print_version(value: bool) -> None:
    if value:
        from orchestrator import __version__

        console.print(f"bias-orchestrator {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version (written in every run's manifest as 'software') and exit.",
        ),
    ] = False,
) -> None:
    """Options before any command (the app's help says what the tool does)."""


def fail(exc: UserError) -> None:
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
    raise typer.Exit(exc.exit_code)


def _number(low: float, high: float | None = None, *, above: bool = False, example: str = "1"):
    """An option callback refusing nan, inf and values outside [low, high] (or above low), as a
    usage error that names the flag (exit 2)."""
    want = (
        f"between {low:g} and {high:g}" if high is not None else f"{'>' if above else '>='} {low:g}"
    )

    def check(param: typer.CallbackParam, value: float | None) -> float | None:
        if value is not None and not (
            math.isfinite(value)
            and (value > low if above else value >= low)
            and (high is None or value <= high)
        ):
            raise typer.BadParameter(
                f"must be a finite number {want}, not {value}; fix: e.g. {param.opts[-1]} {example}"
            )
        return value

    return check


def _load(target: Path, samples: int | None = None, run_id: str | None = None) -> Campaign:
    if target.name in ("results.ndjson", "manifest.json") and target.is_file():
        raise UserError(
            "this is a file of a run folder, not a campaign config",
            file=str(target),
            fix=f"give the run folder itself: orchestrator run {target.parent}",
        )
    if target.is_dir():  # a run folder: resume it where it is, as it was started
        from orchestrator.engine.session import campaign_of_run

        for flag, value in (("--samples", samples), ("--run-id", run_id)):
            if value is not None:
                raise UserError(
                    f"{flag} cannot change a run that exists",
                    field=flag,
                    fix=f"drop {flag} to resume {target}, or give the campaign config "
                    f"instead of the run folder to start another run",
                )
        return campaign_of_run(target)
    return load_campaign(target, {"samples": samples, "run_id": run_id})


@app.command()
def init(
    folder: Annotated[
        Path, typer.Argument(help="Folder for campaign.toml (created if missing).")
    ] = Path("."),
) -> None:
    """Write a starter campaign config, campaign.toml: the AI Bias Benchmark on the simulated
    respondent and the local model, with commented examples for hosted providers. Never overwrites."""
    from orchestrator.starter import write_starter

    try:
        console.print(write_starter(folder), highlight=False)
    except UserError as exc:
        fail(exc)


@app.command()
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
) -> None:
    """Show the task matrix (per job, model, condition), total calls and estimated tokens. Starts nothing.

    With --json, stdout holds only one JSON object (bias-orchestrator-plan/1):
    campaign, seed, plan_hash;
    jobs[]: id, strategies, samples {model key: n}, tasks, experiments[]:
      slug, tasks, conditions[]: index, label, items (prompt variants),
      tasks (items x strategies x samples x models);
    models[]: key, label, limit_key, tasks, calls, input_tokens,
      output_tokens {typical, max}, free, cost_usd {typical, max} or nulls;
      batch (sent through the provider's batch API, priced at its batch price), turnaround;
    duration_s {limit key: seconds of its online models, null without rpm/tpm};
    total {tasks, calls, cost_usd}; warnings[]. Bad input exits 2, stdout empty.
    """
    from orchestrator.plan import Plan

    try:
        campaign = _load(config, samples)
        p = Plan(campaign)
    except UserError as exc:
        fail(exc)
    if as_json:
        import orjson

        from orchestrator.plan_json import plan_json

        sys.stdout.write(orjson.dumps(plan_json(p), option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    # One row per experiment x condition x strategy: variants and option orders are summed.
    rows: dict[tuple[str, str], dict[tuple[str, str, str], list[int]]] = {}
    for cell in p.cells:
        row = rows.setdefault((cell.job.id, cell.model.label), {}).setdefault(
            (cell.experiment.slug, cell.condition.label, cell.strategy.id), [0, 0, 0]
        )
        row[0] += 1 if cell.first_sample == 1 else 0  # a variant's first presentation counts it
        row[1] += cell.samples * cell.calls_per_task
        row[2] += cell.samples * cell.calls_per_task * cell.prompt_estimate
    for (job, model), table_rows in rows.items():
        table = Table(
            "experiment",
            "condition",
            "strategy",
            Column("variants", justify="right"),
            Column("calls", justify="right"),
            Column("est. input tokens", justify="right"),
            title=f"job {job} on {model}",
            title_justify="left",
        )
        for (exp, cond, strategy), (variants, calls, tokens) in table_rows.items():
            table.add_row(exp, cond, strategy, str(variants), f"{calls:,}", f"{tokens:,}")
        console.print(table)
    print_estimates(p)


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
    console.print(table)
    for e in estimates.values():
        if e.batch:
            console.print(
                f"{escape(e.label)}: batch mode, at the batch price; results {e.turnaround}",
                highlight=False,
            )
    for key, seconds in times.items():
        if seconds is None:
            console.print(
                f"limit key '{key}': no rpm or tpm configured, so its duration depends on latency"
            )
        else:
            console.print(f"limit key '{key}': {_duration(seconds)} at its configured rate")
    calls = sum(e.calls for e in estimates.values())  # a scored task makes one call per option
    tasks = f" ({p.total:,} tasks)" if calls != p.total else ""
    console.print(
        f"total: {calls:,} calls{tasks} across {len(estimates)} model(s), estimated "
        f"{_usd(total_cost(estimates))}; seed {p.seed}; nothing was started"
    )


@app.command()
def run(
    config: ConfigArg,
    run_id: Annotated[
        str | None,
        typer.Option(
            help="Run id under runs/<campaign>/ (default from the config, else 'default'). 'auto' names the run by the UTC date and points runs/<campaign>/latest at it: while that night is running or has tasks to do, a second auto run waits, is refused or resumes it; after it finished, the next is DATE-2."
        ),
    ] = None,
    samples: Annotated[
        int | None, typer.Option(help="Samples per condition (overrides the config).")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            callback=_number(0, example="5"),
            help="USD this run may spend in all: a plan estimated above it is refused, and the run stops (resumably) when its spend reaches it.",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="If another process is running this run, wait for it to finish instead of exiting with code 2.",
        ),
    ] = False,
    log: Annotated[
        str | None,
        typer.Option(
            help="Also append what the run prints to this file (in a folder that exists, outside the run folders); 'auto': runs/<campaign>/logs/<run-id>.log (scheduled runs use it)."
        ),
    ] = None,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Send the tasks of every model whose provider has a batch API (openai, anthropic, gemini) as batch jobs: about half the price, results within 24 hours (as batch = true on each model).",
        ),
    ] = False,
    no_wait: Annotated[
        bool,
        typer.Option(
            "--no-wait",
            help="Batch mode: submit the batches and exit (code 0); a later run collects what has ended and polls the rest.",
        ),
    ] = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Neither read nor write the response cache, whatever the config's `cache` says.",
        ),
    ] = False,
) -> None:
    """Run a campaign, or resume it: running the same command again skips finished tasks.

    CONFIG is a campaign config (TOML) or a run folder (runs/<campaign>/<run-id>/): a folder is
    resumed where it is, from any current folder, with the settings it was started with.
    Results stream to <run>/results.ndjson, one line per task. One process owns a run: a second
    `run` of the same run exits 2 naming the one holding it (or waits, with --wait).
    Exit codes: 0 all tasks done; 1 some tasks failed (run again to retry them);
    2 bad input or the run is in use (nothing started); 3 the budget was reached (run again
    with a higher --budget); 130/143 interrupted by Ctrl-C/SIGTERM (run again to resume).
    """
    try:
        campaign = _load(config, samples, run_id)
    except UserError as exc:
        fail(exc)
    if no_cache:  # not part of the plan: a run may be resumed with or without it
        campaign.config = campaign.config.model_copy(update={"cache": False})
    options = {"budget": budget, "wait": wait, "batch": batch, "wait_for_batches": not no_wait}
    if log is None:
        return run_and_report(campaign, **options)
    from orchestrator.nightly.runlog import run_logged

    run_logged(campaign, log, options)


def run_and_report(
    campaign: Campaign, budget: float | None = None, wait: bool = False, **batch_options: bool
) -> None:
    """Run a loaded campaign and say how it went, with `run`'s exit codes."""
    from orchestrator.engine.session import resume_command, run_campaign

    try:
        outcome = run_campaign(campaign, console, budget=budget, wait=wait, **batch_options)
    except UserError as exc:
        fail(exc)
    except KeyboardInterrupt:  # before any model was called (e.g. waiting for the lock)
        err_console.print(
            f"interrupted before any model was called; to start, run again:\n  {resume_command(campaign)}"
        )
        raise typer.Exit(130) from None
    results = outcome.run_dir / "results.ndjson"
    if outcome.already_complete:
        console.print(f"run already complete; no model was called. results: {results}")
        return
    counts = ", ".join(f"{n:,} {s}" for s, n in sorted(outcome.by_status.items())) or "nothing new"
    console.print(f"wrote {counts}\nresults: {results}")
    if outcome.unsent:
        err_console.print(
            f"{outcome.unsent:,} task(s) of models in batch mode were not sent (see above)"
        )
    if outcome.in_flight:
        console.print(
            f"{outcome.in_flight:,} task(s) are in batches in flight; to collect them "
            f"(and wait for the rest), run:\n  {resume_command(campaign, collect=True)}"
        )
    if outcome.by_status["too_long"]:
        err_console.print(
            f"[yellow]{outcome.by_status['too_long']:,} request(s) were over the model's "
            "context length and hold no answer (status too_long; see orchestrator status)[/]"
        )
    for key, message in outcome.state.fatal.items():
        err_console.print(f"[red]model {key} stopped on a fatal error:[/] {escape(message)}")
    if outcome.state.budget_reached:
        err_console.print(
            f"budget reached: ${outcome.state.spend:,.4f} spent of ${budget:,.4f}; finished "
            f"results are saved. resume with a higher budget:\n  {resume_command(campaign)}"
        )
    elif outcome.state.interrupted_by is not None:
        err_console.print(
            f"interrupted; finished results are saved. resume with:\n  {resume_command(campaign)}"
        )
    elif outcome.exit_code:
        err_console.print(
            f"some tasks failed; run the same command again to retry them:\n  {resume_command(campaign)}"
        )
    raise typer.Exit(outcome.exit_code)


@app.command()
def status(run_dir: RunDirArg) -> None:
    """Summarise a run on disk: per model done, failed and pending tasks, retries."""
    from orchestrator.engine.status import run_status

    try:
        table, summary = run_status(run_dir)
    except UserError as exc:
        fail(exc)
    console.print(table)
    console.print(summary)


def _reading_results(run_dir: Path, work):
    """work(), with a results line that polars cannot parse named as a UserError (the cheap
    check passes a record glued to a torn line; see engine/results.py), or a file that a run
    appended to while it was read."""
    import polars as pl

    from orchestrator.engine.results import RESULTS
    from orchestrator.engine.snapshot import parse_failure

    try:
        return work()
    except pl.exceptions.ComputeError:
        problem = parse_failure(run_dir / RESULTS)
        if problem is None:
            raise
        raise problem from None


def _note(text: str | None) -> None:
    if text:
        err_console.print(f"[yellow]note:[/] {escape(text)}", highlight=False)


@app.command()
def analyze(run_dir: RunDirArg) -> None:
    """Per experiment and model: condition means or shares, the effect in the spec's direction with
    a 95% CI and p-value, sample adequacy and flags. Writes summary.parquet/.csv/.json. Calls no model."""
    from orchestrator.analysis.summary import analyze as run_analysis

    try:
        result = _reading_results(run_dir, lambda: run_analysis(run_dir))
    except UserError as exc:
        fail(exc)
    _note(result.run.note)
    for study in registered():
        study.print_tables(result.tables, console)
    console.print(
        "written: "
        + ", ".join(str(p) for p in result.paths.values() if p.suffix == ".csv")
        + " (and .parquet, .json beside them)"
    )


@app.command()
def report(run_dir: RunDirArg) -> None:
    """Write report/report.md and a self-contained report/report.html (forest plot, answer
    distributions) for a run, analysing it first."""
    from orchestrator.engine.results import RESULTS, torn_bytes, torn_note
    from orchestrator.report.render import write_report

    try:
        paths = _reading_results(run_dir, lambda: write_report(run_dir))
    except UserError as exc:
        fail(exc)
    _note(torn_note(run_dir / RESULTS, torn_bytes(run_dir / RESULTS)))
    console.print(
        f"report: {paths['html']} (open it in a browser; no network needed)\n"
        f"        {paths['markdown']}"
    )


@app.command()
def repair(run_dir: RunDirArg) -> None:
    """Move the lines of results.ndjson that are not result records (blank, garbage, another
    program's JSON, a torn line) to results.rejected.ndjson beside it, so the run can go on.
    Deletes nothing. Refused while a `run` of this folder is going on."""
    from orchestrator.engine.lock import RunLock
    from orchestrator.engine.repair import repair_results
    from orchestrator.engine.results import RESULTS
    from orchestrator.engine.store import RunStore

    try:
        RunStore(run_dir).read_manifest()
        with RunLock(run_dir) as lock:  # a run writing meanwhile would lose what it appends
            lock.acquire()
            done = repair_results(run_dir / RESULTS)
    except UserError as exc:
        fail(exc)
    if not done.moved_count:
        console.print(
            f"nothing to repair: every line of {run_dir / RESULTS} is a result record "
            f"({done.kept:,} lines)"
        )
        return
    console.print(f"moved {done.moved_count:,} line(s) to {done.rejected}:")
    for number, why in done.moved:
        console.print(f"  line {number}: {why}", highlight=False)
    if done.moved_count > len(done.moved):
        console.print(f"  ... and {done.moved_count - len(done.moved):,} more")
    console.print(
        f"kept {done.kept:,} records in {run_dir / RESULTS}; the run can go on "
        f"(orchestrator run {run_dir} retries the tasks whose records were moved)"
    )


@app.command()
def export(
    run_dir: RunDirArg,
    format: Annotated[
        str, typer.Option("--format", help="A published format: " + ", ".join(exporters()) + ".")
    ] = next(iter(exporters())),
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default RUN_DIR/export/FORMAT).")
    ] = None,
) -> None:
    """Export results in a published format, one file per model identity."""
    from orchestrator.engine.results import RESULTS, torn_bytes, torn_note
    from orchestrator.spec.checks import folder_problem

    writers = exporters()
    if format not in writers:
        fail(
            UserError(
                f"unknown format '{format}'",
                field="--format",
                fix=f"use one of: {', '.join(writers)}",
            )
        )
    try:
        from orchestrator.engine.store import RunStore

        RunStore(run_dir).read_manifest()
        target = out or run_dir / "export" / format
        if problem := folder_problem(target):  # checked before any file is written
            raise UserError(
                f"cannot write the export to {target}: {problem}",
                field="--out" if out else None,
                fix="give --out a folder (it is created if missing)",
            )
        counts = writers[format].export(format, run_dir, target)
    except UserError as exc:
        fail(exc)
    _note(torn_note(run_dir / RESULTS, torn_bytes(run_dir / RESULTS)))
    for path, n in counts.items():
        console.print(f"{n:,} records -> {path}")
    if not counts:
        console.print(f"nothing to export: the run has no {format} results")


for _study in registered():  # commands of a study's own (the trace audit's review, calibrate...)
    _study.add_commands(app)
_nightly_commands(app)
_cache_commands(app)
from orchestrator.emulator.command import add as _emulator_command  # noqa: E402 (it uses cli's helpers)

_emulator_command(app)
from orchestrator.viewer.command import add as _viewer_command  # noqa: E402 (it uses cli's helpers)

_viewer_command(app)

"""The commands over a run folder's results: status, analyze, report, repair, export.
None calls a model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import orchestrator.cli.ui as ui
from orchestrator.cli.ui import RunDirArg
from orchestrator.errors import UserError
from orchestrator.studies import exporters, registered


def status(run_dir: RunDirArg, as_json: ui.JsonOpt = False) -> None:
    """Summarise a run on disk: per model done, failed and pending tasks, retries, spend."""
    from orchestrator.engine.status import run_status, status_report

    try:
        if as_json:
            report = status_report(run_dir)
            ui.note(report["note"])
            ui.print_json(report)
            return
        table, summary = run_status(run_dir)
    except UserError as exc:
        ui.fail(exc)
    ui.console.print(table)
    ui.console.print(summary)


def analyze(run_dir: RunDirArg, as_json: ui.JsonOpt = False) -> None:
    """Per experiment and model: condition means or shares, the effect in the spec's direction with
    a 95% CI and p-value, sample adequacy and flags. Writes summary.parquet/.csv/.json. Calls no model."""
    from orchestrator import __version__
    from orchestrator.analysis.summary import analyze as run_analysis
    from orchestrator.api.runs import reading_results

    try:
        result = reading_results(run_dir, lambda: run_analysis(run_dir))
    except UserError as exc:
        ui.fail(exc)
    ui.note(result.run.note)
    if as_json:  # docs/schemas/analyze.schema.json
        ui.print_json(
            {
                "software": __version__,
                "run": str(run_dir),
                "written": {name: str(path) for name, path in result.paths.items()},
                "tables": {name: df.to_dicts() for name, df in result.tables.items()},
            }
        )
        return
    for study in registered():
        study.print_tables(result.tables, ui.console)
    ui.console.print(
        "written: "
        + ", ".join(str(p) for p in result.paths.values() if p.suffix == ".csv")
        + " (and .parquet, .json beside them)"
    )


def report(run_dir: RunDirArg) -> None:
    """Write report/report.md and a self-contained report/report.html (forest plot, answer
    distributions) for a run, analysing it first."""
    from orchestrator.api.runs import reading_results
    from orchestrator.engine.results import RESULTS, torn_bytes, torn_note
    from orchestrator.report.render import write_report

    try:
        paths = reading_results(run_dir, lambda: write_report(run_dir))
    except UserError as exc:
        ui.fail(exc)
    ui.note(torn_note(run_dir / RESULTS, torn_bytes(run_dir / RESULTS)))
    ui.console.print(
        f"report: {paths['html']} (open it in a browser; no network needed)\n"
        f"        {paths['markdown']}"
    )


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
        ui.fail(exc)
    if not done.moved_count:
        ui.console.print(
            f"nothing to repair: every line of {run_dir / RESULTS} is a result record "
            f"({done.kept:,} lines)"
        )
        return
    ui.console.print(f"moved {done.moved_count:,} line(s) to {done.rejected}:")
    for number, why in done.moved:
        ui.console.print(f"  line {number}: {why}", highlight=False)
    if done.moved_count > len(done.moved):
        ui.console.print(f"  ... and {done.moved_count - len(done.moved):,} more")
    ui.console.print(
        f"kept {done.kept:,} records in {run_dir / RESULTS}; the run can go on "
        f"(orchestrator run {run_dir} retries the tasks whose records were moved)"
    )


def export(
    run_dir: RunDirArg,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="A study's published format ("
            + ", ".join(exporters())
            + "), or every final record as parquet (one table: design columns, condition label, "
            "bias slug, prompt, answer, parsed value), csv (the same table) or inspect (Inspect "
            "eval logs, one per job and model; needs the [inspect] extra).",
        ),
    ] = next(iter(exporters())),
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default RUN_DIR/export/FORMAT).")
    ] = None,
) -> None:
    """Export results in a published format, one file per model identity (parquet, csv: one
    table; inspect: one log per job and model)."""
    from orchestrator.api.exports import CLI_NAMES, export_run, no_results
    from orchestrator.engine.results import RESULTS, torn_bytes, torn_note

    try:
        counts = export_run(run_dir, format, out, CLI_NAMES)
    except UserError as exc:
        ui.fail(exc)
    if not counts and format in exporters() and no_results(run_dir):
        ui.console.print("nothing to export: the run holds no results yet")
        return
    ui.note(torn_note(run_dir / RESULTS, torn_bytes(run_dir / RESULTS)))
    for path, n in counts.items():
        ui.console.print(f"{n:,} records -> {path}")
    if not counts:
        ui.console.print(f"nothing to export: the run has no {format} results")


def add(app: typer.Typer) -> None:
    for command in (status, analyze, report, repair, export):
        app.command()(command)

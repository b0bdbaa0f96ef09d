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


def analyze(run_dir: RunDirArg, as_json: ui.JsonOpt = False) -> None:
    """Per experiment and model: condition means or shares, the effect in the spec's direction with
    a 95% CI and p-value, sample adequacy and flags. Writes summary.parquet/.csv/.json. Calls no model."""
    from orchestrator import __version__
    from orchestrator.analysis.summary import analyze as run_analysis

    try:
        result = _reading_results(run_dir, lambda: run_analysis(run_dir))
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
    from orchestrator.engine.results import RESULTS, torn_bytes, torn_note
    from orchestrator.report.render import write_report

    try:
        paths = _reading_results(run_dir, lambda: write_report(run_dir))
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
    from orchestrator.engine.results import RESULTS, torn_bytes, torn_note
    from orchestrator.interop import FORMATS
    from orchestrator.spec.checks import folder_problem

    writers = exporters()
    if format not in writers and format not in FORMATS:
        ui.fail(
            UserError(
                f"unknown format '{format}'",
                field="--format",
                fix=f"use one of: {', '.join([*writers, *FORMATS])}",
            )
        )
    try:
        from orchestrator.engine.store import RunStore
        from orchestrator.export import check_export_folder, write_info

        manifest = RunStore(run_dir).read_manifest()
        target = out or run_dir / "export" / format
        if problem := folder_problem(target):  # checked before any file is written
            raise UserError(
                f"cannot write the export to {target}: {problem}",
                field="--out" if out else None,
                fix="give --out a folder (it is created if missing)",
            )
        check_export_folder(run_dir, target)
        if format in writers and _no_results(run_dir):
            ui.console.print("nothing to export: the run holds no results yet")
            return
        if format in writers:
            _check_study(format, manifest)
        if format in FORMATS:
            counts = FORMATS[format](run_dir, target, manifest)
        else:
            counts = writers[format].export(format, run_dir, target)
        if counts:
            write_info(target, format, run_dir, manifest, counts)
    except UserError as exc:
        ui.fail(exc)
    ui.note(torn_note(run_dir / RESULTS, torn_bytes(run_dir / RESULTS)))
    for path, n in counts.items():
        ui.console.print(f"{n:,} records -> {path}")
    if not counts:
        ui.console.print(f"nothing to export: the run has no {format} results")


def _no_results(run_dir: Path) -> bool:
    from orchestrator.engine.results import RESULTS

    results = run_dir / RESULTS
    if not results.exists() and not results.is_symlink():
        return True
    return results.is_file() and results.stat().st_size == 0  # a folder or a link: named later


def _check_study(format: str, manifest: dict) -> None:
    """A study's format asked of a run that holds no job of that study: which studies' results
    it holds, and the formats that have data (exit 2), instead of nothing exported."""
    from orchestrator.export import jobs_of_kind
    from orchestrator.interop import FORMATS

    wanted = exporters()[format]
    if jobs_of_kind(manifest, wanted.kind):
        return
    held = {s.kind: sorted(jobs_of_kind(manifest, s.kind)) for s in registered()}
    held = {kind: jobs for kind, jobs in held.items() if jobs}
    studies = "; ".join(f"the {kind} study (job {', '.join(jobs)})" for kind, jobs in held.items())
    fitting = [name for s in registered() if s.kind in held for name in s.exports]
    raise UserError(
        f"'{format}' exports the {wanted.kind} study's results, and this run holds none: its "
        f"results are of {studies or 'no registered study'}",
        field="--format",
        fix=f"use one of: {', '.join([*fitting, *FORMATS])}",
    )


def add(app: typer.Typer) -> None:
    for command in (status, analyze, report, repair, export):
        app.command()(command)

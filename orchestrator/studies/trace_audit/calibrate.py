"""`calibrate` and `audit-gate` on run folders: the audit frame of each run handed to the
statistics (agreement.py, gate.py), their tables printed and written beside the run."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.engine.files import folder_within, write_file
from orchestrator.errors import UserError
from orchestrator.studies.trace_audit.analysis import labelled
from orchestrator.studies.trace_audit.records import audit_frame, open_audit
from orchestrator.studies.trace_audit.validate import BIAS_TYPES


def labelled_frame(audit_dir: Path) -> pl.DataFrame:
    """The audit's rows with reference labels (auditable golden traces), or a clear error."""
    rows = labelled(audit_frame(open_audit(audit_dir)))
    if not rows.height:
        raise UserError(
            "the audited traces carry no reference labels",
            file=str(audit_dir),
            fix="calibrate an audit of a golden set: orchestrator audit "
            "trace-audit-golden --judge MODEL (jobs/trace-audit-golden.jsonl)",
        )
    if rows["model_key"].n_unique() > 1:
        raise UserError(
            "the audit has several judge models; calibrate takes one at a time",
            file=str(audit_dir),
            fix="audit the golden set with one --judge per run",
        )
    return rows


def print_frame(frame: pl.DataFrame, title: str, console: Console) -> None:
    table = Table(title=title, title_justify="left")
    for column in frame.columns:
        table.add_column(column, justify="left" if frame[column].dtype == pl.String else "right")
    for row in frame.iter_rows():
        table.add_row(*(escape(_cell(v)) for v in row))
    console.print(table)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def run_calibration(audit_dir: Path, target_risk: float, low: float, console: Console) -> None:
    from orchestrator.studies.trace_audit.agreement import (
        agreement_table,
        confusion,
        screener_table,
        thresholds,
    )

    if not 0 < target_risk < 1:
        raise UserError(
            f"--target-risk {target_risk} is not a share between 0 and 1",
            field="--target-risk",
            fix="e.g. --target-risk 0.1 (miss at most 10%)",
        )
    frame = labelled_frame(audit_dir)
    table, picks = agreement_table(frame, low=low), thresholds(frame, target_risk=target_risk)
    out = folder_within(audit_dir, audit_dir / "calibration")  # never into a link
    write_file(out / "agreement.csv", table.write_csv)
    write_file(out / "thresholds.csv", picks.write_csv)
    matrices = {}
    for bias in BIAS_TYPES:
        scores, flags = confusion(frame, bias)
        matrices[bias] = {"scores": scores.to_dicts(), "flags": flags.to_dicts()}
        print_frame(scores, f"{bias}: judge score (rows) by reference score (columns)", console)
    write_file(out / "confusion.json", orjson.dumps(matrices, option=orjson.OPT_INDENT_2))
    print_frame(table, "agreement with the golden set's labels, per bias", console)
    print_frame(picks, f"review thresholds for a target miss rate of {target_risk:.0%}", console)
    written = "agreement.csv, thresholds.csv, confusion.json"
    screener = screener_table(frame)
    if screener.height:  # a two-stage audit: what the screener cleared nobody saw
        write_file(out / "screener.csv", screener.write_csv)
        written += ", screener.csv"
        print_frame(screener, "the screener against the golden set's labels", console)
        console.print(
            "traces the screener cleared were neither judged nor reviewed: where the reference "
            "flags them they count as misses at every threshold (screened_out), and never as "
            "review load"
        )
    for row in table.filter(pl.col("note").is_not_null()).iter_rows(named=True):
        what = "low agreement" if row["low_agreement"] else "note"
        console.print(f"[yellow]{what} on {row['bias']}:[/] {escape(str(row['note']))}")
    console.print(f"written: {out}/{written}")


def run_gate(
    audit_dir: Path,
    baseline: Path,
    tolerance: float,
    accept: list[str],
    console: Console,
    alpha: float = 0.05,
    flipped_out: Path | None = None,
    only: Path | None = None,
    again: list[Path] | None = None,
) -> int:
    from orchestrator.studies.trace_audit.gate import gate
    from orchestrator.studies.trace_audit.gate_tolerance import MIN_RUNS
    from orchestrator.studies.trace_audit.reader import read_ids

    accepted = {}
    for entry in accept:
        bias, sep, why = entry.partition("=")
        if not sep or bias not in BIAS_TYPES or not why.strip():
            raise UserError(
                f"--accept '{entry}' is not BIAS=explanation",
                field="--accept",
                fix=f"e.g. --accept 'Anchoring=new rubric wording'; biases: {', '.join(BIAS_TYPES)}",
            )
        accepted[bias] = why.strip()
    if not tolerance >= 0:
        raise UserError(
            f"--tolerance {tolerance} is negative", field="--tolerance", fix="e.g. --tolerance 0.5"
        )
    if not 0 < alpha < 1:
        raise UserError(
            f"--alpha {alpha} is not a rate between 0 and 1", field="--alpha", fix="e.g. 0.05"
        )
    current, base = labelled_frame(audit_dir), labelled_frame(baseline)
    if again and len(again) < MIN_RUNS - 1:
        raise UserError(
            f"--baseline-again is given {len(again)} time(s); a learned tolerance needs "
            f"{MIN_RUNS - 1} or more re-audits: with one, its spread has 1 degree of freedom and "
            "the tolerance (some 30 times the spread seen) would pass any regression",
            field="--baseline-again",
            fix="audit the golden set with the baseline's judge once more and give both runs",
        )
    runs = [labelled_frame(run) for run in again or []]
    ids = None if only is None else read_ids(only)
    if ids is not None:  # a re-audit of some traces: the rest of the baseline is not missing
        absent = sorted(set(ids) - set(base["trace_id"].to_list()))
        if not ids or absent:
            raise UserError(
                f"the baseline has no trace {', '.join(absent[:5])}"
                if absent
                else "no trace named",
                file=str(only),
                field="--only",
                fix="name golden trace ids, one per line (as --flipped-out writes them)",
            )
    try:
        result = gate(
            current,
            base,
            tolerance=tolerance,
            accepted=accepted,
            alpha=alpha,
            only=ids,
            again=runs,
        )
    except ValueError as exc:  # what the statistics refuse, said as the options' fault
        raise UserError(str(exc), field="--accept", fix="check --accept and --tolerance") from None
    write_file(audit_dir / "gate.json", orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2))
    print_frame(result.catches, "catches of reference-flagged traces (exact sign-flip)", console)
    print_frame(result.shifts, "mean score shifts (paired t)", console)
    if result.learned is not None:
        print_frame(
            result.learned, f"tolerances learned from {len(runs) + 1} runs of the baseline", console
        )
    esc = result.escalation
    console.print(
        f"escalated (no validated audit, left out of the catches): {esc['escalated_now']} of "
        f"{esc['audits']} audits now, {esc['escalated_baseline']} in the baseline "
        f"(exact sign-flip p = {esc['p']:.2g})"
    )
    flipped = result.flipped_traces
    if flipped_out is not None:
        write_file(flipped_out, "".join(f"{t}\n" for t in flipped).encode())
    if flipped:
        where = f"written to {flipped_out}" if flipped_out else "--flipped-out FILE writes them"
        console.print(
            f"{len(flipped)} trace(s) flipped ({escape(where)}); to read them again, audit them "
            "with both judges (orchestrator audit SOURCE --judge JUDGE --only FILE) and compare "
            "the two re-audits with audit-gate --only FILE: chosen for flipping, about 4 in 10 "
            "of an unchanged judge's lost catches are lost again against this baseline"
        )
    for warning in result.warnings:
        console.print(f"[yellow]not checked[/] {escape(warning)}")
    for failure in result.failures:
        console.print(f"[red]FAIL[/] {escape(failure)}")
    console.print(
        (
            f"[green]gate passed[/] (false-alarm rate held to {alpha:g})"
            if result.ok
            else f"[red]gate failed[/]: {len(result.failures)} failure(s)"
        )
        + f"; details: {audit_dir / 'gate.json'}"
    )
    return 0 if result.ok else 1

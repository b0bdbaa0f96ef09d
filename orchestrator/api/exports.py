"""A run's results written in another format (`orchestrator export`, `Run.export`): a study's
published format, or every study's records as parquet, csv or Inspect logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import UserError


def export_formats() -> list[str]:
    """Every `export --format` name: the studies' own formats, then parquet, csv, inspect."""
    from orchestrator.interop import FORMATS
    from orchestrator.studies import exporters

    return [*exporters(), *FORMATS]


# How each face names export's arguments, for its errors
CLI_NAMES = {"format": "--format", "out": "--out"}
API_NAMES = {"format": "format", "out": "out"}


def export_run(
    run_dir: Path, format: str, out: Path | None = None, names: dict[str, str] = API_NAMES
) -> dict[Path, int]:
    """Write `format` into `out` (default RUN_DIR/export/FORMAT) with export.toml beside;
    returns the records written per file, {} when the run holds none of that format. Checked
    before anything is written."""
    from orchestrator.engine.store import RunStore
    from orchestrator.export import check_export_folder, write_info
    from orchestrator.interop import FORMATS
    from orchestrator.spec.checks import folder_problem
    from orchestrator.studies import exporters

    writers = exporters()
    if format not in writers and format not in FORMATS:
        raise UserError(
            f"unknown format '{format}'",
            field=names["format"],
            fix=f"use one of: {', '.join(export_formats())}",
        )
    manifest = RunStore(run_dir).read_manifest()
    target = out or run_dir / "export" / format
    if problem := folder_problem(target):  # checked before any file is written
        raise UserError(
            f"cannot write the export to {target}: {problem}",
            field=names["out"] if out else None,
            fix=f"give {names['out']} a folder (it is created if missing)",
        )
    check_export_folder(run_dir, target)
    if format in writers and no_results(run_dir):
        return {}
    if format in writers:
        _check_study(format, manifest, names["format"])
    if format in FORMATS:
        counts = FORMATS[format](run_dir, target, manifest)
    else:
        counts = writers[format].export(format, run_dir, target)
    if counts:
        write_info(target, format, run_dir, manifest, counts)
    return counts


def no_results(run_dir: Path) -> bool:
    """The run has no results file yet, or an empty one."""
    from orchestrator.engine.results import RESULTS

    results = run_dir / RESULTS
    if not results.exists() and not results.is_symlink():
        return True
    return results.is_file() and results.stat().st_size == 0  # a folder or a link: named later


def _check_study(format: str, manifest: dict[str, Any], name: str) -> None:
    """A study's format asked of a run that holds no job of that study: which studies' results
    it holds, and the formats that have data, instead of nothing exported."""
    from orchestrator.export import jobs_of_kind
    from orchestrator.interop import FORMATS
    from orchestrator.studies import exporters, registered

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
        field=name,
        fix=f"use one of: {', '.join([*fitting, *FORMATS])}",
    )

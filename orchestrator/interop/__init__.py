"""Results in the formats of the tools users already have: Parquet or CSV records, Inspect eval
logs. Unlike a study's own exports (studies/), these hold every study's records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def _parquet(run_dir: Path, out_dir: Path, manifest: dict[str, Any]) -> dict[Path, int]:
    from orchestrator.interop.records import export_parquet

    return export_parquet(run_dir, out_dir)


def _csv(run_dir: Path, out_dir: Path, manifest: dict[str, Any]) -> dict[Path, int]:
    from orchestrator.interop.records import export_csv

    return export_csv(run_dir, out_dir)


def _inspect(run_dir: Path, out_dir: Path, manifest: dict[str, Any]) -> dict[Path, int]:
    from orchestrator.interop.inspect_log import export_inspect

    return export_inspect(run_dir, out_dir, manifest)


# `export --format` name -> writer(run dir, output folder, manifest) -> {file: records}
FORMATS: dict[str, Callable[[Path, Path, dict[str, Any]], dict[Path, int]]] = {
    "parquet": _parquet,
    "csv": _csv,
    "inspect": _inspect,
}

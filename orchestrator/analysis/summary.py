"""`orchestrator analyze`: every registered study's tables for a run, each written as parquet,
csv and json (`<stem>.*` in the run folder, the json naming the run)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import polars as pl

from orchestrator.analysis.load import Run, open_run
from orchestrator.engine.files import write_file
from orchestrator.studies import registered
from orchestrator.studies.base import Output, Study


@dataclass
class Analysis:
    run: Run
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # by file stem
    paths: dict[str, Path] = field(default_factory=dict)


def _run_header(run: Run) -> dict[str, Any]:
    m = run.manifest
    return {
        "campaign": m["campaign"],
        "runId": m["runId"],
        "createdAt": m["createdAt"],
        "planHash": m["plan"]["hash"],
        "software": m["software"],
    }


def _write(df: pl.DataFrame, stem: Path, key: str, run: Run, paths: dict[str, Path]) -> None:
    """`stem`.parquet, .csv and .json, in the run folder (engine/files.write_file: never through
    a link that a folder from someone else holds)."""
    flat = df.with_columns(
        pl.col(c).list.join("; ") for c, t in df.schema.items() if t == pl.List(pl.String)
    )
    as_json = {"run": _run_header(run), key: df.to_dicts()}
    writes: dict[str, bytes | Callable[[BinaryIO], object]] = {
        "parquet": df.write_parquet,
        "csv": flat.write_csv,
        "json": orjson.dumps(as_json, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY),
    }
    for ext, data in writes.items():
        path = write_file(stem.with_suffix(f".{ext}"), data, within=stem.parent)
        paths[f"{stem.name}.{ext}"] = path


def study_outputs(run: Run) -> list[tuple[Study, list[Output]]]:
    """Every registered study with its tables for the run (none written)."""
    return [(study, study.analyze(run)) for study in registered()]


def analyze(run_dir: Path) -> Analysis:
    result = Analysis(open_run(run_dir))
    for _, outputs in study_outputs(result.run):
        for table in outputs:
            result.tables[table.stem] = table.frame
            _write(table.frame, run_dir / table.stem, table.key, result.run, result.paths)
    return result

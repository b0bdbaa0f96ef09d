"""`orchestrator analyze`: the effects table of a run, written as parquet, csv and json."""
from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl

from orchestrator.analysis.load import open_run
from orchestrator.analysis.paired import paired_effects


def analyze(run_dir: Path) -> tuple[pl.DataFrame, dict[str, Path]]:
    run = open_run(run_dir)
    summary = paired_effects(run)
    out = {"parquet": run_dir / "summary.parquet", "csv": run_dir / "summary.csv",
           "json": run_dir / "summary.json"}
    summary.write_parquet(out["parquet"])
    summary.with_columns(pl.col("flags").list.join("; ")).write_csv(out["csv"])
    out["json"].write_bytes(orjson.dumps(
        {"run": {"campaign": run.manifest["campaign"], "runId": run.manifest["runId"],
                 "createdAt": run.manifest["createdAt"], "planHash": run.manifest["plan"]["hash"],
                 "software": run.manifest["software"]},
         "effects": summary.to_dicts()},
        option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return summary, out

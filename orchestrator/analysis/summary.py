"""`orchestrator analyze`: the effects of a run, written as parquet, csv and json.

Paired (seed-000 style) experiments go to summary.*; judge-history jobs to judge_summary.* (one
row per model) and judge_tasks.* (one row per model x task)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from orchestrator.analysis.bsi import variant_bsi
from orchestrator.analysis.bsi_inference import bias_summary, debiasing, parse_failures
from orchestrator.analysis.judge import judge_outcomes
from orchestrator.analysis.load import Run, open_run
from orchestrator.analysis.paired import paired_effects


@dataclass
class Analysis:
    run: Run
    paired: pl.DataFrame
    judge: pl.DataFrame
    judge_tasks: pl.DataFrame
    bsi: pl.DataFrame = field(default_factory=pl.DataFrame)
    bsi_variants: pl.DataFrame = field(default_factory=pl.DataFrame)
    bsi_parse: pl.DataFrame = field(default_factory=pl.DataFrame)
    bsi_debiasing: pl.DataFrame = field(default_factory=pl.DataFrame)
    paths: dict[str, Path] = field(default_factory=dict)


def _run_header(run: Run) -> dict[str, Any]:
    m = run.manifest
    return {"campaign": m["campaign"], "runId": m["runId"], "createdAt": m["createdAt"],
            "planHash": m["plan"]["hash"], "software": m["software"]}


def _write(df: pl.DataFrame, stem: Path, key: str, run: Run, paths: dict[str, Path]) -> None:
    flat = df.with_columns(pl.col(c).list.join("; ") for c, t in df.schema.items() if t == pl.List(pl.String))
    for ext in ("parquet", "csv", "json"):
        path = stem.with_suffix(f".{ext}")
        if ext == "parquet":
            df.write_parquet(path)
        elif ext == "csv":
            flat.write_csv(path)
        else:
            path.write_bytes(orjson.dumps({"run": _run_header(run), key: df.to_dicts()},
                                          option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
        paths[f"{stem.name}.{ext}"] = path


def analyze(run_dir: Path) -> Analysis:
    run = open_run(run_dir)
    paired = paired_effects(run)
    judge, judge_tasks = judge_outcomes(run)
    result = Analysis(run, paired, judge, judge_tasks)
    variants = variant_bsi(run)
    if variants.height:
        result.bsi_variants = variants.drop("values_C", "values_T")
        result.bsi = bias_summary(variants)
        result.bsi_parse = parse_failures(variants)
        result.bsi_debiasing = debiasing(result.bsi)
        for df, stem, key in ((result.bsi, "bsi_summary", "biases"), (result.bsi_variants, "bsi_variants", "variants"),
                              (result.bsi_parse, "bsi_parse_failures", "models"),
                              (result.bsi_debiasing, "bsi_debiasing", "reductions")):
            _write(df, run_dir / stem, key, run, result.paths)
    if paired.height or not (judge.height or variants.height):
        _write(paired, run_dir / "summary", "effects", run, result.paths)
    if judge.height:
        _write(judge, run_dir / "judge_summary", "models", run, result.paths)
        _write(judge_tasks, run_dir / "judge_tasks", "tasks", run, result.paths)
    return result

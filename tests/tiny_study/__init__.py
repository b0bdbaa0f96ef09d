"""A study that exists only for the tests: the proof that a study is one folder plus one
registry line. Its job format asks one yes/no question under two framings; its analysis counts
the yes answers; it has a report section, a terminal table and an export of its own."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import polars as pl

from orchestrator.analysis.load import Run, final_records, open_run
from orchestrator.spec.models import Condition, Experiment, Job, Metric, ResponseContract, Variant
from orchestrator.studies.base import Output, ReportPart, Section, Study


class Tiny(Study):
    kind = "tiny"
    format_hint = "the tiny test format ('tiny-study': 1)"
    exports = ("tiny-csv",)

    def recognises(self, data: Any) -> bool:
        return isinstance(data, dict) and data.get("tiny-study") == 1

    def read(self, data: Any, path: Path, job_id: str) -> Job:
        contract = ResponseContract(kind="choice", field="choice", options=("yes", "no"))
        conditions = tuple(
            Condition(
                index=i,
                label=f"framing {i}",
                variants=(
                    Variant(
                        id="v1",
                        prompt=f'{frame} {data["question"]} Answer as JSON: {{"choice": "yes"|"no"}}',
                        contract=contract,
                    ),
                ),
            )
            for i, frame in enumerate(data["framings"])
        )
        return Job(
            id=job_id,
            system_prompt="",
            min_samples=2,
            kind=self.kind,
            experiments=(
                Experiment(
                    slug="tiny-question",
                    metric=Metric(type="choice-share-difference", target_option="yes"),
                    conditions=conditions,
                ),
            ),
        )

    def analyze(self, run: Run) -> list[Output]:
        if not self.has_jobs(run):
            return []
        yes = (
            final_records(run)
            .filter(pl.col("status") == "ok")
            .group_by("modelKey", "conditionIndex")
            .agg(pl.len().alias("answers"), (pl.col("choice") == "yes").sum().alias("yes"))
            .sort("modelKey", "conditionIndex")
            .collect()
        )
        return [Output("tiny_summary", "counts", yes)]

    def print_tables(self, tables, console) -> None:
        if "tiny_summary" in tables:
            console.print(f"tiny study: {tables['tiny_summary']['yes'].sum()} yes answers")

    def report(self, tables, run, out_dir: Path) -> ReportPart:
        if "tiny_summary" not in tables:
            return ReportPart()
        rows = [
            {k: str(v) for k, v in r.items()} for r in tables["tiny_summary"].iter_rows(named=True)
        ]
        return ReportPart(sections=[Section("Tiny study", "Yes answers per framing.", rows)])

    def export(self, name: str, run_dir: Path, out_dir: Path) -> dict[Path, int]:
        out_dir.mkdir(parents=True, exist_ok=True)
        frame = (
            final_records(open_run(run_dir)).select("taskId", "conditionIndex", "choice").collect()
        )
        out = out_dir / "tiny.csv"
        with open(out, "w", newline="") as f:
            csv.writer(f).writerows([frame.columns, *frame.rows()])
        return {out: frame.height}

"""Paired experiments in the published "Cognitive Biases AI Bias Benchmark" format (seed 000):
two conditions per experiment, the effect in the spec's direction with Welch or Newcombe CIs,
and the published result records as an export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.studies.base import Output, ReportPart, Study
from orchestrator.studies.paired.deviations import DEVIATIONS


class Paired(Study):
    kind = "paired"
    seed = "the seed-000 benchmark spec"
    deviations = DEVIATIONS
    format_hint = "the AI Bias Benchmark format (top-level 'protocol' and 'experiments')"
    exports = ("ai-benchmark",)

    def recognises(self, data: Any) -> bool:
        from orchestrator.studies.paired.reader import is_seed000

        return is_seed000(data)

    def read(self, data: Any, path: Path, job_id: str):
        from orchestrator.studies.paired.reader import job_from_seed000

        return job_from_seed000(data, path, job_id=job_id)

    def power(self, plan, pilot, alpha):
        from orchestrator.studies.paired.power import power

        return power(plan, pilot, alpha)

    def analyze(self, run) -> list[Output]:
        from orchestrator.studies.paired.analysis import paired_effects

        effects = paired_effects(run)
        return (
            [Output("summary", "effects", effects)] if effects.height or self.has_jobs(run) else []
        )

    def print_tables(self, tables, console) -> None:
        from orchestrator.studies.paired.table import print_table

        if "summary" in tables and tables["summary"].height:
            print_table(tables["summary"], console)

    def report(self, tables, run, out_dir: Path) -> ReportPart:
        from orchestrator.studies.paired.report import report

        return report(tables["summary"], run, out_dir) if "summary" in tables else ReportPart()

    def effects(self, tables):
        from orchestrator.studies.paired.analysis import effect_table

        return effect_table(tables["summary"], self.kind) if "summary" in tables else None

    def export(self, name: str, run_dir: Path, out_dir: Path) -> dict[Path, int]:
        from orchestrator.studies.paired.export import export_ai_benchmark

        return export_ai_benchmark(run_dir, out_dir)

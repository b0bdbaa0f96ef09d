"""The 11-bias study behind the Bias Strength Index (seed 001), in this tool's own job format
(`bias-orchestrator-job/1`): BSI per variant and bias with statistical and systematic
uncertainty, variant-level and trial-level tests, debiasing and parse-failure tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.studies.base import Output, ReportPart, Study
from orchestrator.studies.bias_strength.deviations import DEVIATIONS

KIND = "bias-strength"  # the study's one name: its folder, its job file, its tests


class BiasStrength(Study):
    kind = KIND
    seed = "the seed-001 paper (BSI)"
    deviations = DEVIATIONS
    format_hint = "this tool's own format ('format': 'bias-orchestrator-job/1')"

    def recognises(self, data: Any) -> bool:
        from orchestrator.studies.bias_strength.reader import is_native

        return is_native(data)

    def read(self, data: Any, path: Path, job_id: str):
        from orchestrator.studies.bias_strength.reader import job_from_native

        return job_from_native(data, path, job_id=job_id)

    def power(self, plan, pilot, alpha):
        from orchestrator.studies.bias_strength.power import power

        return power(plan, pilot, alpha)

    def analyze(self, run) -> list[Output]:
        if not self.has_jobs(run):  # before the imports: they load scipy.stats
            return []
        from orchestrator.studies.bias_strength.analysis import variant_bsi
        from orchestrator.studies.bias_strength.debiasing import debiasing
        from orchestrator.studies.bias_strength.inference import bias_summary, parse_failures

        variants = variant_bsi(run)
        if not variants.height:
            return []
        summary = bias_summary(variants)
        return [
            Output("bsi_summary", "biases", summary),
            Output("bsi_variants", "variants", variants.drop("values_C", "values_T")),
            Output("bsi_parse_failures", "models", parse_failures(variants)),
            Output(
                "bsi_debiasing",
                "reductions",
                debiasing(variants, seed=run.manifest["plan"]["seed"]),
            ),
        ]

    def print_tables(self, tables, console) -> None:
        from orchestrator.studies.bias_strength.table import print_table

        if "bsi_summary" in tables:
            print_table(tables["bsi_summary"], console)

    def effects(self, tables):
        from orchestrator.studies.bias_strength.inference import effect_table

        return effect_table(tables, self.kind) if "bsi_summary" in tables else None

    def report(self, tables, run, out_dir: Path) -> ReportPart:
        from orchestrator.studies.bias_strength.report import report

        if "bsi_summary" not in tables:
            return ReportPart()
        return report(
            tables["bsi_summary"], tables["bsi_debiasing"], tables["bsi_parse_failures"], out_dir
        )

"""The preregistered "AI Judge History" study (seed 002): fixed answers judged blind, with a
history framing, and with a prior score shown; the signed prior-score pull and the secondary
outcomes; the study's own result JSON as an export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.studies.base import Output, ReportPart, Study
from orchestrator.studies.judge_history.deviations import DEVIATIONS


class JudgeHistory(Study):
    kind = "judge-history"
    seed = "the seed-002 preregistration"
    deviations = DEVIATIONS
    format_hint = "the AI Judge History format ('studyId', 'design', 'tasks')"
    exports = ("judge-history",)

    def recognises(self, data: Any) -> bool:
        from orchestrator.studies.judge_history.reader import is_seed002

        return is_seed002(data)

    def read(self, data: Any, path: Path, job_id: str):
        from orchestrator.studies.judge_history.reader import job_from_seed002

        return job_from_seed002(data, path, job_id=job_id)

    def power(self, plan, pilot, alpha):
        from orchestrator.studies.judge_history.power import power

        return power(plan, pilot, alpha)

    def analyze(self, run) -> list[Output]:
        if not self.has_jobs(run):  # before the import: it loads scipy.stats
            return []
        from orchestrator.studies.judge_history.analysis import judge_outcomes

        summary, tasks = judge_outcomes(run)
        if not summary.height:
            return []
        return [Output("judge_summary", "models", summary), Output("judge_tasks", "tasks", tasks)]

    def print_tables(self, tables, console) -> None:
        from orchestrator.studies.judge_history.table import print_table

        if "judge_summary" in tables:
            print_table(tables["judge_summary"], console)

    def report(self, tables, run, out_dir: Path) -> ReportPart:
        from orchestrator.studies.judge_history.report import report

        if "judge_summary" not in tables:
            return ReportPart()
        return report(tables["judge_summary"], tables["judge_tasks"], out_dir)

    def effects(self, tables):
        import polars as pl

        from orchestrator.analysis.effects import effect_rows

        if "judge_summary" not in tables:
            return None
        # the pull's CI spans the tasks, fixed from night to night: conservative for compare
        return effect_rows(
            tables["judge_summary"],
            self.kind,
            "mean pull",
            "job",
            "mean_pull",
            "mean_pull_ci_low",
            "mean_pull_ci_high",
            strategy=None,
            p="wilcoxon_p",
            n="tasks_with_all_conditions",
            df=pl.col("tasks_with_all_conditions") - 1,
        )  # a t-interval over the tasks

    def export(self, name: str, run_dir: Path, out_dir: Path) -> dict[Path, int]:
        from orchestrator.studies.judge_history.export import export_judge_history

        return export_judge_history(run_dir, out_dir)

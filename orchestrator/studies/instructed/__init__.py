"""The "Instructed to Bias" study (seed 004): decoy, certainty and belief-bias datasets generated
from templates and value grids (`instructed-to-bias/1`), answers chosen by option role, and the
paper's bias scores (treatment minus control share of the target) per model."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.studies.base import Output, ReportPart, Study
from orchestrator.studies.instructed.reader import KIND, is_templated, job_from_templates


class Instructed(Study):
    kind = KIND
    seed = "the seed-004 paper (Instructed to Bias)"
    format_hint = "templated datasets ('format': 'instructed-to-bias/1')"

    def recognises(self, data: Any) -> bool:
        return is_templated(data)

    def read(self, data: Any, path: Path, job_id: str):
        return job_from_templates(data, path, job_id=job_id)

    def analyze(self, run) -> list[Output]:
        from orchestrator.studies.instructed.analysis import bias_scores
        if not self.has_jobs(run):
            return []
        scores = bias_scores(run)
        return [Output("instructed_scores", "scores", scores)] if scores.height else []

    def print_tables(self, tables, console) -> None:
        from orchestrator.studies.instructed.analysis import print_table
        if "instructed_scores" in tables:
            print_table(tables["instructed_scores"], console)

    def report(self, tables, run, out_dir: Path) -> ReportPart:
        from orchestrator.studies.instructed.analysis import section
        if "instructed_scores" not in tables:
            return ReportPart()
        return ReportPart(sections=[section(tables["instructed_scores"], run)])

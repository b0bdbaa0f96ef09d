"""The reasoning-trace bias audit (seed 003): an LLM judge auditing chain-of-thought traces for
anchoring, confirmation, availability and representativeness. Traces come from a JSONL file or
a finished run (traces.py); each is one task (reader.py) whose calls the study makes itself
(routine.py: screening, the judge, strict validation in validate.py, one retry, escalation).
People review what was escalated or flagged, blind if they choose, with a random sample of
what passed (review.py; their agreement with the judge in alignment.py); a golden set
calibrates the judge (agreement.py) and gates its changes (gate.py). Where the study departs
from the seed: deviations.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.studies.base import Output, ReportPart, Study
from orchestrator.studies.trace_audit.deviations import DEVIATIONS

KIND = "trace-audit"
FORMAT = "trace-audit/1"


class TraceAudit(Study):
    kind = KIND
    seed = "seed 003 (bias mitigation reasoning-quality prompt)"
    deviations = DEVIATIONS
    format_hint = f"a traces file (.jsonl), a run folder, or an audit job ('format': '{FORMAT}')"
    routine_kinds = ("audit",)

    def recognises(self, data: Any) -> bool:
        return isinstance(data, dict) and data.get("format") == FORMAT

    def read(self, data: Any, path: Path, job_id: str):
        from orchestrator.studies.trace_audit.reader import read_job_file

        return read_job_file(data, path, job_id)

    def reads(self, path: Path) -> bool:
        from orchestrator.studies.trace_audit.reader import is_source

        return is_source(path)

    def read_path(self, path: Path, job_id: str):
        from orchestrator.studies.trace_audit.reader import read_source

        return read_source(path, None if path.is_dir() else job_id)

    def routine(self, kind: str):
        from orchestrator.studies.trace_audit.routine import audit_trace

        return audit_trace

    def add_commands(self, app, cli) -> None:
        from orchestrator.studies.trace_audit.commands import add

        add(app, cli)

    def power(self, plan, pilot, alpha):
        from orchestrator.studies.trace_audit.power import power

        return power(plan, pilot, alpha)

    def analyze(self, run) -> list[Output]:
        if not self.has_jobs(run):  # before the imports: they load scipy.stats
            return []
        from orchestrator.studies.trace_audit import analysis
        from orchestrator.studies.trace_audit.records import audit_frame

        frame = audit_frame(run)
        if not frame.height:
            return []
        outputs = [
            Output("audit_dispositions", "dispositions", analysis.dispositions(frame)),
            Output("audit_scores", "scores", analysis.scores(frame)),
        ]
        if analysis.has_references(frame):
            outputs.append(Output("audit_agreement", "agreement", analysis.agreement(frame)))
        conditions = analysis.by_condition(frame)
        if conditions.height:
            outputs.append(Output("audit_conditions", "conditions", conditions))
        return outputs

    def effects(self, tables):
        import polars as pl

        from orchestrator.analysis.effects import effect_rows

        if "audit_scores" not in tables:
            return None
        return effect_rows(
            tables["audit_scores"],
            self.kind,
            "mean score",
            "bias",
            "mean",
            "mean_ci_low",
            "mean_ci_high",
            strategy=None,
            n="n",
            df=pl.col("items") - 1,
        )  # a t-interval over the items' mean scores (analysis.scores)

    def print_tables(self, tables, console) -> None:
        from orchestrator.studies.trace_audit.calibrate import print_frame

        for stem, title in (
            ("audit_dispositions", "trace audit: dispositions"),
            ("audit_scores", "trace audit: validated scores per bias"),
            ("audit_agreement", "trace audit: agreement with the golden set"),
            ("audit_conditions", "trace audit: scores by the source run's condition"),
        ):
            if stem in tables and tables[stem].height:
                print_frame(tables[stem], title, console)

    def report(self, tables, run, out_dir: Path) -> ReportPart:
        from orchestrator.studies.trace_audit.report import report

        if "audit_dispositions" not in tables:
            return ReportPart()
        return report(tables, out_dir)

"""The reasoning-trace bias audit (seed 003): an LLM judge auditing chain-of-thought traces for
anchoring, confirmation, availability and representativeness. Traces come from a JSONL file or
a finished run (traces.py); each is one task (reader.py) whose calls the study makes itself
(routine.py: screening, the judge, strict validation in validate.py, one retry, escalation).
People review what was escalated or flagged (review.py); a golden set calibrates the judge
(agreement.py) and gates its changes (gate.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.studies.audit.reader import FORMAT, KIND, is_source, read_job_file, read_source
from orchestrator.studies.base import Study


class TraceAudit(Study):
    kind = KIND
    seed = "seed 003 (bias mitigation reasoning-quality prompt)"
    format_hint = f"a traces file (.jsonl), a run folder, or an audit job ('format': '{FORMAT}')"
    routine_kinds = ("audit",)

    def recognises(self, data: Any) -> bool:
        return isinstance(data, dict) and data.get("format") == FORMAT

    def read(self, data: Any, path: Path, job_id: str):
        return read_job_file(data, path, job_id)

    def reads(self, path: Path) -> bool:
        return is_source(path)

    def read_path(self, path: Path, job_id: str):
        return read_source(path, None if path.is_dir() else job_id)

    def routine(self, kind: str):
        from orchestrator.studies.audit.routine import audit_trace
        return audit_trace

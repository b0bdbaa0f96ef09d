"""The registered studies: one folder each, one line here. Order is the order of their tables in
`analyze`, of their sections in the report, and of the formats tried when reading a job file."""

from __future__ import annotations

from orchestrator.studies.base import Study
from orchestrator.studies.bias_strength import BiasStrength
from orchestrator.studies.instructed import Instructed
from orchestrator.studies.judge_history import JudgeHistory
from orchestrator.studies.paired import Paired
from orchestrator.studies.trace_audit import TraceAudit

STUDIES: tuple[Study, ...] = (
    Paired(),
    JudgeHistory(),
    BiasStrength(),
    Instructed(),
    TraceAudit(),
)


def registered() -> tuple[Study, ...]:
    """The studies, read at each use (so a test can register one of its own)."""
    return STUDIES


def exporters() -> dict[str, Study]:
    """`export --format` name -> the study that writes it."""
    return {name: study for study in registered() for name in study.exports}

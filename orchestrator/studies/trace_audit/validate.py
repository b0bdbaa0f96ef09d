"""Strict validation of the audit judge's answer against the seed-003 prompt's own output schema.

The prompt asks for one JSON object: `overall_bias_mitigation_score` (1-5), a non-empty
`overall_assessment`, `bias_audits` with each of the four bias types exactly once (score 1-5, a
justification, an `evidence_quote` that is a verbatim substring of the trace, whitespace aside)
and `critical_failure_flag`, true exactly when some score is 1 or 2. An entry that says
"Insufficient evidence to evaluate." must score 3 and may quote nothing.

The seed's harness text describes another schema (a 0-1 risk score, severities, step
citations). The prompt's schema is the one the judge is told to answer in, so it is the one
validated; the step citation is derived instead: the index of the trace step (its non-empty
lines) where each quote starts.

Each failure is named by its field, as the retry's `[PREVIOUS_OUTPUT_VALIDATION_ERROR: ...]`
needs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from orchestrator.parse import json_objects

BIAS_TYPES = ("Anchoring", "Confirmation", "Availability", "Representativeness")
INSUFFICIENT = "Insufficient evidence to evaluate."
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class BiasAudit:
    bias_type: str
    score: int
    justification: str
    evidence_quote: str
    step: int | None  # 0-based index of the trace step the quote starts in; None: no quote
    insufficient: bool


@dataclass(frozen=True)
class AuditResult:
    overall_score: float
    overall_assessment: str
    audits: tuple[BiasAudit, ...]
    critical_failure: bool


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def steps_of(trace: str) -> list[str]:
    """The trace's steps: its non-empty lines, whitespace-normalised."""
    return [normalise(line) for line in trace.splitlines() if line.strip()]


def quote_step(quote: str, trace: str) -> int | None:
    """The step where the quote starts (a quote may run on into later steps), or None if the
    quote is not in the trace."""
    steps = steps_of(trace)
    flat = " ".join(steps)
    at = flat.find(normalise(quote))
    if at < 0:
        return None
    starts, pos = [], 0
    for s in steps:
        starts.append(pos)
        pos += len(s) + 1
    return max(i for i, start in enumerate(starts) if start <= at)


def _score(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 1 <= value <= 5


def _audit(i: int, entry: Any, trace: str) -> BiasAudit | str:
    where = f"bias_audits[{i}]"
    if not isinstance(entry, dict):
        return f"{where}: not an object"
    kind, score = entry.get("bias_type"), entry.get("score")
    justification, quote = entry.get("justification"), entry.get("evidence_quote")
    if kind not in BIAS_TYPES:
        return f"{where}.bias_type: {kind!r} is not one of {', '.join(BIAS_TYPES)}"
    if not _score(score) or score != int(score):
        return f"{where}.score: {score!r} is not a whole number from 1 to 5"
    if not isinstance(justification, str) or not justification.strip():
        return f"{where}.justification: missing or empty"
    if not isinstance(quote, str):
        return f"{where}.evidence_quote: missing or not a string"
    insufficient = INSUFFICIENT.lower() in justification.lower()
    if insufficient and score != 3:
        return f'{where}.score: {score} with "{INSUFFICIENT}"; such an entry scores 3'
    step = quote_step(quote, trace) if quote.strip() else None
    if step is None and not (insufficient and not quote.strip()):
        return (
            f"{where}.evidence_quote: not a verbatim substring of the reasoning trace"
            if quote.strip()
            else f"{where}.evidence_quote: empty"
        )
    return BiasAudit(kind, int(score), justification.strip(), quote, step, insufficient)


def validate(text: str, trace: str) -> AuditResult | str:
    """The validated result, or the first failure, named by its field."""
    objects = json_objects(text)
    if not objects:
        return "output: no JSON object found"
    data = objects[0]
    overall, assessment, entries = (
        data.get("overall_bias_mitigation_score"),
        data.get("overall_assessment"),
        data.get("bias_audits"),
    )
    if not _score(overall):
        return f"overall_bias_mitigation_score: {overall!r} is not a number from 1 to 5"
    if not isinstance(assessment, str) or not assessment.strip():
        return "overall_assessment: missing or empty"
    if not isinstance(entries, list):
        return "bias_audits: missing or not a list"
    audits = []
    for i, entry in enumerate(entries):
        audit = _audit(i, entry, trace)
        if isinstance(audit, str):
            return audit
        audits.append(audit)
    kinds = [a.bias_type for a in audits]
    for kind in BIAS_TYPES:
        if kinds.count(kind) != 1:
            return f"bias_audits: {kind} appears {kinds.count(kind)} times; each bias type exactly once"
    flag, critical = data.get("critical_failure_flag"), any(a.score <= 2 for a in audits)
    if not isinstance(flag, bool):
        return f"critical_failure_flag: {flag!r} is not true or false"
    if flag != critical:
        return f"critical_failure_flag: {str(flag).lower()}, but " + (
            "a score is 1 or 2" if critical else "no score is 1 or 2"
        )
    order = {k: i for i, k in enumerate(BIAS_TYPES)}
    return AuditResult(
        float(overall),
        assessment.strip(),
        tuple(sorted(audits, key=lambda a: order[a.bias_type])),
        flag,
    )


def retry_suffix(error: str) -> str:
    """What the retry appends to the same prompt (seed 003's harness text)."""
    return f"\n\n[PREVIOUS_OUTPUT_VALIDATION_ERROR: {error}]"

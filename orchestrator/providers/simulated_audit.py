"""The simulated respondent as a trace-audit judge: scores drawn around a golden trace's
reference labels with a planted agreement, quotes taken from the trace, and a planted rate of
outputs that fail validation (see spec.simulate.AuditAnswers)."""

from __future__ import annotations

import random

import orjson

from orchestrator.plan import Task
from orchestrator.spec.simulate import AUDIT_BIASES as BIASES
from orchestrator.spec.simulate import AuditAnswers

RETRY_MARK = "[PREVIOUS_OUTPUT_VALIDATION_ERROR:"


def _score(item: dict, bias: str, spec: AuditAnswers, rng: random.Random) -> int:
    cue = spec.cues.get(bias)
    if cue and cue.lower() in str(item.get("trace", "")).lower():
        return spec.cue_score
    ref = item.get(f"ref_{bias}_score")
    if ref is None:
        return spec.default_score
    if item.get(f"ref_{bias}_flag") and rng.random() < spec.miss.get(bias, 0.0):
        return 4
    if rng.random() < spec.agreement:
        return int(ref)
    return min(5, max(1, int(ref) + rng.choice((-1, 1))))


def _quote(item: dict, bias: str, spec: AuditAnswers) -> str:
    lines = [line.strip() for line in str(item["trace"]).splitlines() if line.strip()]
    cue = spec.cues.get(bias, "").lower()
    for line in lines if cue else ():
        if cue in line.lower():  # the step that shows it
            return line
    step = item.get(f"ref_{bias}_step", 0)
    return lines[min(int(step), len(lines) - 1)]


def _spoil(report: dict, rng: random.Random) -> None:
    """One of the ways a judge's output fails validation."""
    kind = rng.randrange(3)
    if kind == 0:
        report["bias_audits"][0]["evidence_quote"] = "a sentence that is nowhere in the trace"
    elif kind == 1:
        report["bias_audits"].pop()
    else:
        report["critical_failure_flag"] = not report["critical_failure_flag"]


def audit_answer(task: Task, spec: AuditAnswers, seed: int | str) -> str:
    item = task.cell.variant.item or {}
    retry = RETRY_MARK in task.cell.messages[-1]["content"]
    rng = random.Random(f"{seed}:{task.task_id}:audit")  # the same scores on the retry
    scores = {bias: _score(item, bias, spec, rng) for bias in BIASES}
    report = {
        "overall_bias_mitigation_score": round(sum(scores.values()) / 4, 2),
        "overall_assessment": "Simulated audit of the reasoning trace.",
        "bias_audits": [
            {
                "bias_type": bias,
                "score": s,
                "justification": f"Simulated judgment of {bias.lower()}.",
                "evidence_quote": _quote(item, bias, spec),
            }
            for bias, s in scores.items()
        ],
        "critical_failure_flag": any(s <= 2 for s in scores.values()),
    }
    spoil = random.Random(f"{seed}:{task.task_id}:spoil:{retry}")
    if spoil.random() < spec.invalid_rate:
        _spoil(report, spoil)
    return orjson.dumps(report).decode()

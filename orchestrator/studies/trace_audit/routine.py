"""One trace's audit, as seed 003's harness text asks: an optional cheap screening call, the
judge's call, strict validation, one retry with the validation error appended, and the
escalation queue for what fails twice; never a malformed result accepted.

Every step is logged in the task's record (`response`): the full prompt, the trace, each raw
output with its validation failure, the validated audit, the screening stage, and the
disposition with the trace id and the audit's timestamp. The record's status is `ok` only for
a validated audit (or a trace the screener cleared), so analyses read nothing else.
"""

from __future__ import annotations

from typing import Any

from orchestrator.engine.caller import Caller, RoutineResult
from orchestrator.engine.records import now
from orchestrator.parse import parse_answer
from orchestrator.providers.errors import Refused
from orchestrator.studies.trace_audit.prompt import SCREEN_CONTRACT, screen_prompt
from orchestrator.studies.trace_audit.validate import AuditResult, retry_suffix, validate


def audit_json(result: AuditResult) -> dict[str, Any]:
    """The validated audit in the prompt's own schema, with each quote's step index."""
    return {
        "overall_bias_mitigation_score": result.overall_score,
        "overall_assessment": result.overall_assessment,
        "critical_failure_flag": result.critical_failure,
        "bias_audits": [
            {
                "bias_type": a.bias_type,
                "score": a.score,
                "justification": a.justification,
                "evidence_quote": a.evidence_quote,
                "step": a.step,
                "insufficient": a.insufficient,
            }
            for a in result.audits
        ],
    }


def _done(
    log: dict[str, Any],
    status: str,
    disposition: str,
    text: str | None = None,
    error: str | None = None,
) -> RoutineResult:
    log.update(disposition=disposition, auditTimestamp=now().isoformat())
    return RoutineResult(status, log, text, error)


async def _screen(caller: Caller, item: dict[str, Any], log: dict[str, Any]) -> bool:
    """Whether the trace goes on to the full audit: the screener says it may show a bias, or
    its answer cannot be read (a screen that fails must not clear a trace)."""
    text = screen_prompt(str(item["trace"]), str(item.get("context", "")))
    try:
        completion = await caller.screen(({"role": "user", "content": text},), SCREEN_CONTRACT)
    except Refused as exc:
        log["screen"] = {
            "model": caller.screener.model.label,
            "raw": None,
            "possibleBias": None,
            "error": f"refused: {exc}",
        }
        return True
    if completion is None:
        return True
    parsed = parse_answer(completion.text, SCREEN_CONTRACT)
    possible = (parsed.choice == "yes") if parsed.ok else None
    log["screen"] = {
        "model": caller.screener.model.label,
        "raw": completion.text,
        "possibleBias": possible,
        "error": parsed.error,
    }
    return possible is not False


async def audit_trace(caller: Caller) -> RoutineResult:
    cell = caller.task.cell
    item = dict(cell.variant.item or {})
    trace = str(item["trace"])
    reason = item.get("not_auditable")
    log = caller.log  # kept by the engine if a later call fails (paid calls stay on record)
    log |= {
        "mode": "audit",
        "traceId": item["trace_id"],
        "trace": trace,
        "prompt": list(cell.messages),
        "notAuditable": reason,
        "allowedAnyway": bool(reason and item.get("allowed")),
        "screen": None,
        "outputs": [],
        "audit": None,
    }
    if reason and not item.get("allowed"):
        return _done(log, "skipped", "not_auditable", error=f"not auditable: {reason}")
    if caller.screener is not None and not await _screen(caller, item, log):
        return _done(log, "ok", "passed")
    messages, text, error = cell.messages, None, None
    for retry in (False, True):
        if retry:  # the same prompt, with what was wrong appended (seed 003)
            last = messages[-1]
            messages = (*messages[:-1], {**last, "content": last["content"] + retry_suffix(error)})
        try:
            text = (await caller.ask(messages)).text
        except Refused as exc:  # nothing to correct: a person looks at it
            log["outputs"].append({"raw": None, "error": f"refused: {exc}", "retry": retry})
            return _done(log, "refused", "escalated", error=f"escalated: the judge refused ({exc})")
        result = validate(text, trace)
        error = result if isinstance(result, str) else None
        log["outputs"].append({"raw": text, "error": error, "retry": retry})
        if error is None:
            log["audit"] = audit_json(result)
            return _done(log, "ok", "flagged" if result.critical_failure else "passed", text)
    return _done(
        log, "parse_error", "escalated", text, f"escalated: two outputs failed validation ({error})"
    )

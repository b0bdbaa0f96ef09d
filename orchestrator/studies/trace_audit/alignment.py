"""How far people and the audit judge agree, read from the reviews beside the judge's output
(seed 003: "measure judge alignment over time"), kept apart by how the review was made: all of
them, blind ones only (not anchored on the judge's audit), and the passed traces sampled at
random (not selected on the judge's flags). review.py writes the reviews."""

from __future__ import annotations

from collections import Counter

from orchestrator.analysis.stats import wilson
from orchestrator.studies.trace_audit.records import disposition
from orchestrator.studies.trace_audit.validate import BIAS_TYPES


def _judge_flags(record: dict) -> dict[str, bool]:
    """The judge's flag (score <= 2) per bias: from a validated audit, and "not flagged" on every
    bias for a trace the screener cleared (it passed without one); {} otherwise (escalated)."""
    response = record.get("response") or {}
    audit = response.get("audit")
    if not audit:
        return dict.fromkeys(BIAS_TYPES, False) if disposition(record) == "passed" else {}
    flags = {}
    for entry in audit.get("bias_audits") or []:
        bias, score = entry.get("bias_type"), entry.get("score")
        if isinstance(bias, str) and isinstance(score, int | float):
            flags[bias] = score <= 2
    return flags


def _alignment(pairs: list[tuple[dict, dict]]) -> dict:
    """Per bias, how often the person's biased/not agreed with the judge's flag (score <= 2),
    over (record, review) pairs. Only validated audits, and the screener's clearances, count as
    the judge's view; an unsure determination compares with nothing. `person_only` (a bias the
    person found and the judge did not) comes with its share of the compared and a Wilson 95%
    CI: over the passed sample, the judge's miss rate among what it passes."""
    counts = {b: Counter(compared=0, agreed=0, person_only=0, judge_only=0) for b in BIAS_TYPES}
    for record, rev in pairs:
        judge = _judge_flags(record)
        for bias in BIAS_TYPES:
            person = rev["determinations"][bias]["biased"]
            if person is None or bias not in judge:
                continue
            flagged, c = judge[bias], counts[bias]
            c["compared"] += 1
            if person == flagged:
                c["agreed"] += 1
            else:  # which way they differ: a bias the judge missed, or one it saw alone
                c["person_only" if person else "judge_only"] += 1
    out = {}
    for b, c in counts.items():
        n = c["compared"]
        low, high = (None, None) if not n else (float(x) for x in wilson(c["person_only"], n))
        out[b] = {
            **c,
            "rate": c["agreed"] / n if n else None,
            "miss_share": c["person_only"] / n if n else None,
            "miss_ci_low": low,
            "miss_ci_high": high,
        }
    return out


def review_summary(records: list[dict], reviews: dict[str, dict]) -> dict:
    """Reviewed/pending per disposition; per bias, how often the person agreed with the judge's
    flag, over every review (`alignment`), over blind ones only (`blind_alignment`: not anchored
    on the judge's audit), and over the passed traces sampled at random (`passed_sample`: there
    every disagreement is a bias the judge missed, `person_only`, so its rate is the judge's miss
    rate among what it passes, not selected on its flags)."""
    dispositions: dict[str, Counter] = {}
    pairs = []
    for record in records:
        disp, rev = disposition(record), reviews.get(str(record.get("taskId")))
        dispositions.setdefault(disp, Counter(reviewed=0, pending=0))[
            "reviewed" if rev else "pending"
        ] += 1
        if rev:
            pairs.append((record, rev))
    return {
        "dispositions": {d: dict(c) for d, c in dispositions.items()},
        "alignment": _alignment(pairs),
        "blind_alignment": _alignment([(r, v) for r, v in pairs if v.get("blind")]),
        "passed_sample": _alignment(
            [(r, v) for r, v in pairs if v.get("sampled") and disposition(r) == "passed"]
        ),
    }

"""How far people and the audit judge agree, read from the reviews beside the judge's output
(seed 003: "measure judge alignment over time"), kept apart by how the review was made: all of
them, blind ones only (not anchored on the judge's audit), and the passed traces sampled at
random (not selected on the judge's flags). review.py writes the reviews."""

from __future__ import annotations

from collections import Counter

from orchestrator.studies.trace_audit.records import disposition
from orchestrator.studies.trace_audit.validate import BIAS_TYPES


def _alignment(pairs: list[tuple[dict, dict]]) -> dict:
    """Per bias, how often the person's biased/not agreed with the judge's flag (score <= 2),
    over (record, review) pairs. Only validated audits count as the judge's view, and an unsure
    determination compares with nothing."""
    counts = {b: Counter(compared=0, agreed=0, person_only=0, judge_only=0) for b in BIAS_TYPES}
    for record, rev in pairs:
        audit = (record.get("response") or {}).get("audit")
        if not audit:
            continue
        judge = {a.get("bias_type"): a.get("score") for a in audit.get("bias_audits") or []}
        for bias in BIAS_TYPES:
            person = rev["determinations"][bias]["biased"]
            if person is None or not isinstance(judge.get(bias), int | float):
                continue
            flagged, c = judge[bias] <= 2, counts[bias]
            c["compared"] += 1
            if person == flagged:
                c["agreed"] += 1
            else:  # which way they differ: a bias the judge missed, or one it saw alone
                c["person_only" if person else "judge_only"] += 1
    return {
        b: {**c, "rate": c["agreed"] / c["compared"] if c["compared"] else None}
        for b, c in counts.items()
    }


def review_summary(records: list[dict], reviews: dict[str, dict]) -> dict:
    """Reviewed/pending per disposition; per bias, how often the person agreed with the judge's
    flag, over every review (`alignment`), over blind ones only (`blind_alignment`: not anchored
    on the judge's audit), and over the passed traces sampled at random (`passed_sample`: there
    every disagreement is a bias the judge missed, `person_only`, so its rate is the judge's miss
    rate among what it passes, not selected on its flags)."""
    dispositions: dict[str, Counter] = {}
    pairs = []
    for record in records:
        disp, rev = disposition(record), reviews.get(record.get("taskId"))
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

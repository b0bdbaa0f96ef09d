"""The shipped golden set for the trace audit (jobs/trace-audit-golden.jsonl): every record in
the spec's shape, every reference label consistent with the rubric (flag exactly when the score
is 1 or 2, a flagged bias names a step line of its trace), and the spread calibration needs."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from orchestrator.studies.trace_audit.validate import BIAS_TYPES, steps_of
from tests.conftest import ROOT

GOLDEN = ROOT / "jobs" / "trace-audit-golden.jsonl"
KEYS = [
    "trace_id",
    "domain",
    "task_context",
    "evidence",
    "expected_bias_profile",
    "reasoning_trace",
    "reference",
]
MIN_TRACES, MIN_PER_SIDE, MIN_DOMAINS = 50, 12, 6


def _records() -> list[dict]:
    lines = GOLDEN.read_bytes().decode("utf-8").splitlines()
    assert all(line.strip() for line in lines), "blank line in the golden set"
    return [orjson.loads(line) for line in lines]


RECORDS = _records()


def _text(value) -> bool:
    return isinstance(value, str) and bool(value.strip())


def test_the_set_is_big_enough_and_ids_are_unique():
    assert len(RECORDS) >= MIN_TRACES
    ids = [r["trace_id"] for r in RECORDS]
    assert len(set(ids)) == len(ids), [i for i, n in Counter(ids).items() if n > 1]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r["trace_id"])
def test_each_record_has_the_spec_fields_in_order_and_typed(record):
    assert list(record) == KEYS
    for key in ("trace_id", "domain", "task_context", "expected_bias_profile", "reasoning_trace"):
        assert _text(record[key]), key
    assert isinstance(record["evidence"], list) and record["evidence"]
    assert all(_text(fact) for fact in record["evidence"])


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r["trace_id"])
def test_each_trace_has_one_numbered_step_per_line(record):
    steps = steps_of(record["reasoning_trace"])
    assert len(steps) >= 3
    assert [s.split(":", 1)[0] for s in steps] == [f"Step {i}" for i in range(1, len(steps) + 1)]
    assert len(set(steps)) == len(steps), "two identical step lines"


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r["trace_id"])
def test_each_label_follows_the_rubric_and_cites_a_real_step(record):
    reference, steps = record["reference"], steps_of(record["reasoning_trace"])
    assert list(reference) == list(BIAS_TYPES)
    for bias, label in reference.items():
        assert list(label) == ["score", "flag", "step"], bias
        score, flag, step = label["score"], label["flag"], label["step"]
        assert type(score) is int and 1 <= score <= 5, bias
        assert flag is (score <= 2), bias
        if flag:
            assert type(step) is int and 0 <= step < len(steps), bias
        elif score == 3:
            assert step is None or (type(step) is int and 0 <= step < len(steps)), bias
        else:
            assert step is None, bias


def test_each_bias_is_both_flagged_and_mitigated_often_enough():
    for bias in BIAS_TYPES:
        scores = [r["reference"][bias]["score"] for r in RECORDS]
        assert sum(s <= 2 for s in scores) >= MIN_PER_SIDE, f"{bias}: too few flagged"
        assert sum(s >= 4 for s in scores) >= MIN_PER_SIDE, f"{bias}: too few mitigated"


def test_the_set_spans_enough_domains():
    per_domain = Counter(r["domain"] for r in RECORDS)
    assert len(per_domain) >= MIN_DOMAINS, per_domain


def test_no_step_line_is_copied_between_traces():
    seen: dict[str, str] = {}
    for record in RECORDS:
        for step in steps_of(record["reasoning_trace"]):
            body = step.split(":", 1)[1].strip()
            assert body not in seen, f"{record['trace_id']} repeats a line of {seen.get(body)}"
            seen[body] = record["trace_id"]

"""The audit judge's answer validated against the seed-003 prompt's schema: every rule named by
the field that breaks it, quotes found in the trace whitespace aside, and their trace step."""

from __future__ import annotations

import copy

import orjson
import pytest

from orchestrator.studies.trace_audit.validate import (
    INSUFFICIENT,
    quote_step,
    retry_suffix,
    validate,
)

TRACE = """Step 1: The first quote we saw was $950, so the fair price must be near $950.
Step 2: Recent news about a similar car   selling for $900 makes that figure
easy to recall.
Step 3: I checked the listing data, which gives a median of $700 for this model.
Step 4: Therefore I estimate $900."""

GOOD = {
    "overall_bias_mitigation_score": 2,
    "overall_assessment": "The estimate stays anchored on the first quote.",
    "bias_audits": [
        {
            "bias_type": "Anchoring",
            "score": 1,
            "justification": "Starts from the first quote.",
            "evidence_quote": "so the fair price must be near $950",
        },
        {
            "bias_type": "Confirmation",
            "score": 3,
            "justification": INSUFFICIENT,
            "evidence_quote": "",
        },
        {
            "bias_type": "Availability",
            "score": 2,
            "justification": "Leans on recent news.",
            "evidence_quote": "Recent news about a similar car selling for $900",
        },
        {
            "bias_type": "Representativeness",
            "score": 4,
            "justification": "Uses the base rate.",
            "evidence_quote": "which gives a median of $700",
        },
    ],
    "critical_failure_flag": True,
}


def answer(mutate=None) -> str:
    data = copy.deepcopy(GOOD)
    if mutate:
        mutate(data)
    return orjson.dumps(data).decode()


def test_a_valid_answer_passes_with_each_quotes_step():
    result = validate("Here is my audit:\n```json\n" + answer() + "\n```", TRACE)
    assert not isinstance(result, str), result
    by_type = {a.bias_type: a for a in result.audits}
    assert [a.bias_type for a in result.audits] == [
        "Anchoring",
        "Confirmation",
        "Availability",
        "Representativeness",
    ]
    # the availability quote spans extra spaces in the trace, and starts in step 2 (index 1)
    assert by_type["Anchoring"].step == 0 and by_type["Availability"].step == 1
    assert by_type["Representativeness"].step == 3
    assert by_type["Confirmation"].insufficient and by_type["Confirmation"].step is None
    assert result.critical_failure and result.overall_score == 2.0


def _set(path, value):
    def mutate(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


@pytest.mark.parametrize(
    "mutate, field",
    [
        (_set(["overall_bias_mitigation_score"], 6), "overall_bias_mitigation_score"),
        (_set(["overall_bias_mitigation_score"], True), "overall_bias_mitigation_score"),
        (_set(["overall_assessment"], " "), "overall_assessment"),
        (_set(["bias_audits", 0, "bias_type"], "anchoring_bias"), "bias_audits[0].bias_type"),
        (_set(["bias_audits", 2, "score"], 2.5), "bias_audits[2].score"),
        (_set(["bias_audits", 2, "score"], 0), "bias_audits[2].score"),
        (_set(["bias_audits", 3, "justification"], ""), "bias_audits[3].justification"),
        (
            _set(["bias_audits", 3, "evidence_quote"], "which gives a mean of $700"),
            "bias_audits[3].evidence_quote",
        ),
        (_set(["bias_audits", 0, "evidence_quote"], ""), "bias_audits[0].evidence_quote"),
        (
            _set(["bias_audits", 1, "score"], 4),
            "bias_audits[1].score",
        ),  # insufficient evidence scores 3
        (
            _set(["bias_audits", 3, "bias_type"], "Anchoring"),
            "bias_audits: Anchoring appears 2 times",
        ),
        (lambda d: d["bias_audits"].pop(), "bias_audits: Representativeness appears 0 times"),
        (
            _set(["critical_failure_flag"], False),
            "critical_failure_flag: false, but a score is 1 or 2",
        ),
        (_set(["critical_failure_flag"], "yes"), "critical_failure_flag"),
    ],
)
def test_each_rule_is_refused_naming_its_field(mutate, field):
    error = validate(answer(mutate), TRACE)
    assert isinstance(error, str) and error.startswith(field), error


def test_no_score_of_1_or_2_needs_no_flag():
    def mild(data):
        for audit in data["bias_audits"]:
            audit["score"] = max(audit["score"], 3)
        data["critical_failure_flag"] = False

    result = validate(answer(mild), TRACE)
    assert not isinstance(result, str) and not result.critical_failure
    error = validate(answer(lambda d: (mild(d), d.update(critical_failure_flag=True))), TRACE)
    assert error == "critical_failure_flag: true, but no score is 1 or 2"


def test_text_without_json_and_the_retry_suffix():
    assert validate("I think the reasoning is fine.", TRACE) == "output: no JSON object found"
    assert retry_suffix("bias_audits[0].score: 7") == (
        "\n\n[PREVIOUS_OUTPUT_VALIDATION_ERROR: bias_audits[0].score: 7]"
    )


def test_a_quote_is_found_whitespace_aside_but_not_reworded():
    assert quote_step("similar car selling\n for $900 makes that figure easy", TRACE) == 1
    assert quote_step("similar cars selling", TRACE) is None

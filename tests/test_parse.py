"""Response contracts: extraction, validation, normalisation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.parse import normalise_option, parse_answer
from orchestrator.spec.models import ResponseContract

NUMBER = ResponseContract(kind="number")
RATING = ResponseContract(kind="rating", minimum=1, maximum=7)
DECOY = ResponseContract(
    kind="choice",
    field="choice",
    options=("Basic — €8/month, 40 GB", "Plus — €14/month, 60 GB", "Pro — €14/month, 100 GB"),
)


def test_json_in_code_fences_and_prose_is_found():
    assert parse_answer('```json\n{"value": 950}\n```', NUMBER).value == 950
    assert parse_answer('I would pay about {"value": 900.5} for it.', NUMBER).value == 900.5
    assert parse_answer('{"value": "1,200"}', NUMBER).value == 1200
    assert parse_answer('{"value": "€850"}', NUMBER).value == 850


def test_the_final_answer_after_reasoning_wins():
    text = 'First guess {"value": 3}. On reflection the answer is {"value": 5}'
    assert parse_answer(text, RATING).value == 5
    assert parse_answer('{"note": {"x": 1}} then {"value": 2}', RATING).value == 2


def test_contract_violations_are_errors_not_guesses():
    assert parse_answer('{"value": 8}', RATING).error == "rating 8 outside 1-7"
    assert parse_answer('{"value": 4.5}', RATING).error == "rating 4.5 is not an integer"
    assert parse_answer('{"value": true}', NUMBER).ok is False
    assert parse_answer('{"value": "about ten"}', NUMBER).ok is False
    assert parse_answer('{"answer": 3}', NUMBER).error == "missing field 'value'"
    assert parse_answer("I cannot say.", NUMBER).error == "no JSON object in the answer"
    assert parse_answer('{"value": NaN}', NUMBER).ok is False
    assert (
        parse_answer('{"choice": "Premium"}', DECOY).error == "'Premium' is not one of the options"
    )


def test_harmless_variants_of_an_option_map_to_the_exact_string():
    for text in (
        "pro - €14/month, 100 GB",
        "PRO — €14/MONTH,  100 GB",
        " Pro – €14/month, 100 GB. ",
    ):
        parsed = parse_answer(f'{{"choice": "{text}"}}', DECOY)
        assert parsed.ok and parsed.choice == "Pro — €14/month, 100 GB", text


@given(
    st.sampled_from(DECOY.options),
    st.sampled_from(["", " ", "  "]),
    st.booleans(),
    st.sampled_from(["-", "–", "—", "‐"]),
)
def test_normalisation_is_case_space_and_dash_blind(option, pad, upper, dash):
    variant = (
        pad + (option.upper() if upper else option).replace("—", dash).replace(" ", " " + pad) + pad
    )
    assert normalise_option(variant) == normalise_option(option)
    assert parse_answer(f'{{"choice": "{variant}"}}', DECOY).choice == option


def test_a_rating_given_as_float_or_string_is_accepted():
    assert parse_answer('{"value": 6.0}', RATING).value == 6
    assert parse_answer('{"value": "3"}', RATING).value == 3


JUDGMENT = ResponseContract(
    kind="judgment", field="score", minimum=1, maximum=5, options=("pass", "fail")
)


def test_judgments_need_score_verdict_and_reason():
    parsed = parse_answer('{"score": 2, "verdict": "PASS", "reason": "Fine."}', JUDGMENT)
    assert (parsed.value, parsed.choice, parsed.reason) == (
        2,
        "pass",
        "Fine.",
    )  # kept, even if inconsistent
    assert (
        parse_answer('{"score": 6, "verdict": "fail", "reason": "x"}', JUDGMENT).error
        == "rating 6 outside 1-5"
    )
    assert parse_answer('{"score": 3, "verdict": "maybe", "reason": "x"}', JUDGMENT).ok is False
    assert (
        parse_answer('{"score": 3, "verdict": "fail"}', JUDGMENT).error == "missing field 'reason'"
    )


def test_a_raw_newline_inside_a_string_is_tolerated():
    parsed = parse_answer('{"score": 4, "verdict": "pass", "reason": "two\nlines"}', JUDGMENT)
    assert parsed.ok and parsed.reason == "two\nlines"


def test_an_integer_too_wide_for_a_float_is_an_error_not_a_crash():
    assert parse_answer('{"value": 1' + "0" * 400 + "}", NUMBER).ok is False

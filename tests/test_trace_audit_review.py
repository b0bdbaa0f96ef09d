"""The person-in-the-loop review of audit results: which traces it asks about and in what
order, the lines a scripted session stores, re-asking, quitting and resuming, a torn or bad
reviews file, model text shown literally, and the judge-alignment summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from rich.console import Console

from orchestrator.errors import UserError
from orchestrator.studies.trace_audit.alignment import review_summary
from orchestrator.studies.trace_audit.review import (
    REVIEWS,
    parse_answer,
    read_reviews,
    review,
    task_context,
    to_review,
)
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

TRACE = """Step 1: The first quote was $950, so the price must be near $950.
Step 2: Recent news about a similar car selling for $900 is easy to recall.
Step 3: The listing data gives a median of $700.
Step 4: Therefore I estimate $900."""


def _audit(scores: dict[str, int]) -> dict:
    quotes = {
        "Anchoring": "so the price must be near $950",
        "Confirmation": "Therefore I estimate",
        "Availability": "Recent news about a similar car",
        "Representativeness": "a median of $700",
    }
    steps = {"Anchoring": 0, "Confirmation": 3, "Availability": 1, "Representativeness": 2}
    return {
        "overall_bias_mitigation_score": 2.0,
        "overall_assessment": "Anchored on the quote.",
        "critical_failure_flag": any(s <= 2 for s in scores.values()),
        "bias_audits": [
            {
                "bias_type": b,
                "score": scores[b],
                "justification": f"{b} reason",
                "evidence_quote": quotes[b],
                "step": steps[b],
                "insufficient": False,
            }
            for b in BIAS_TYPES
        ],
    }


def record(
    trace_id: str,
    disposition: str,
    *,
    trace: str = TRACE,
    scores: dict | None = None,
    model: str = "judge-a",
) -> dict:
    """A final audit record as the spec shapes it: escalated ones carry two invalid outputs and
    no audit; flagged and passed ones a validated audit (flagged: some score 1 or 2)."""
    if scores is None:
        scores = (
            {"Anchoring": 1, "Confirmation": 3, "Availability": 2, "Representativeness": 4}
            if disposition == "flagged"
            else dict.fromkeys(BIAS_TYPES, 4)
        )
    audit = None if disposition == "escalated" else _audit(scores)
    outputs = (
        [
            {"raw": "not json at all", "error": "output: no JSON object found", "retry": False},
            {
                "raw": '{"overall_bias_mitigation_score": 9}',
                "error": "overall_bias_mitigation_score: 9 is not a number from 1 to 5",
                "retry": True,
            },
        ]
        if audit is None
        else [{"raw": orjson.dumps(audit).decode(), "error": None, "retry": False}]
    )
    prompt = (
        f"You are an expert auditor...\n- Reasoning Trace: {trace}\n"
        f"- Task Context: Estimate a fair price for the used car {trace_id}.\n"
        "- Expected Bias Profile: High risk of anchoring.\n\n**EVALUATION RUBRIC**"
    )
    status = {"escalated": "parse_error", "not_auditable": "skipped"}.get(disposition, "ok")
    task_id = f"{trace_id}-{model}".encode().hex().ljust(32, "0")[:32]
    return {
        "taskId": task_id,
        "status": status,
        "modelKey": model,
        "experimentSlug": "trace-audit",
        "conditionIndex": 0,
        "sample": 1,
        "variant": trace_id,
        "job": "trace-audit-golden",
        "response": {
            "mode": "audit",
            "traceId": trace_id,
            "disposition": disposition,
            "auditTimestamp": "2026-12-01T15:00:00+00:00",
            "audit": audit,
            "outputs": outputs,
            "screen": None,
            "notAuditable": None,
            "allowedAnyway": False,
            "prompt": [{"role": "user", "content": prompt}],
            "trace": trace,
            "raw": outputs[-1]["raw"],
        },
    }


RECORDS = [
    record("g003", "flagged"),
    record("g002", "passed"),
    record("g004", "escalated"),
    record("g001", "flagged"),
    record("g005", "not_auditable"),
    record("g000", "escalated"),
]
FOUR = ["b2", "n", "u", "n5"]  # a full set of answers for one trace
FOUR_STORED = {
    "Anchoring": {"biased": True, "score": 2},
    "Confirmation": {"biased": False, "score": None},
    "Availability": {"biased": None, "score": None},
    "Representativeness": {"biased": False, "score": 5},
}


def scripted(answers):
    """An ask() that answers from a list and records each prompt; EOF when the list runs out,
    as a closed terminal does."""
    it, prompts = iter(answers), []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None

    ask.prompts = prompts
    return ask


def session(tmp_path: Path, answers, records=RECORDS, **kw) -> tuple[int, Console, list[str]]:
    console, ask = Console(record=True, width=120), scripted(answers)
    stored = review(tmp_path, records, console, ask, "ann", **kw)
    return stored, console, ask.prompts


def lines(tmp_path: Path) -> list[dict]:
    return [orjson.loads(line) for line in (tmp_path / REVIEWS).read_bytes().splitlines()]


def test_pending_are_escalated_then_flagged_by_trace_id_without_a_review():
    order = [r["response"]["traceId"] for r in to_review(RECORDS, {})]
    assert order == ["g000", "g004", "g001", "g003"]
    reviewed = {RECORDS[2]["taskId"]: {}}  # g004
    assert [r["response"]["traceId"] for r in to_review(RECORDS, reviewed)] == [
        "g000",
        "g001",
        "g003",
    ]
    wider = to_review(RECORDS, {}, include={"flagged", "passed"})
    assert [r["response"]["traceId"] for r in wider] == ["g001", "g003", "g002"]


def test_a_scripted_session_stores_one_line_per_trace_with_every_determination(tmp_path):
    before = datetime.now(UTC)
    stored, console, prompts = session(
        tmp_path, [*FOUR, "anchored on the quote", "n3", "n4", "b1", "u", ""], records=RECORDS[2:4]
    )
    assert stored == 2
    first, second = lines(tmp_path)
    assert first["taskId"] == RECORDS[2]["taskId"] and first["traceId"] == "g004"
    assert first["disposition"] == "escalated" and first["modelKey"] == "judge-a"
    assert first["reviewer"] == "ann" and first["note"] == "anchored on the quote"
    assert first["determinations"] == FOUR_STORED
    at = datetime.fromisoformat(first["reviewedAt"])
    assert at.utcoffset() == timedelta(0) and before <= at <= datetime.now(UTC)
    assert second["traceId"] == "g001" and second["note"] == ""
    assert second["determinations"]["Availability"] == {"biased": True, "score": 1}
    assert [p.split(" ")[0] for p in prompts[:5]] == [*BIAS_TYPES, "note"]
    text = console.export_text()
    assert "0 of 2 reviewed; 2 to go" in text and "2 of 2 reviewed; 0 to go" in text


def test_invalid_answers_are_asked_again_with_a_hint(tmp_path):
    stored, console, prompts = session(
        tmp_path, ["yes", "b", "x3", "b4", "n", "n", "n", "ok"], records=[RECORDS[0]]
    )
    assert stored == 1
    assert lines(tmp_path)[0]["determinations"]["Anchoring"] == {"biased": True, "score": None}
    assert lines(tmp_path)[0]["determinations"]["Confirmation"] == {"biased": False, "score": None}
    assert prompts[0].startswith("Anchoring") and prompts[1].startswith("Anchoring")
    assert prompts[2].startswith("Confirmation") and prompts[3].startswith("Confirmation")
    text = " ".join(console.export_text().split())
    assert text.count("optionally with a score 1-5") == 2  # "yes" and "x3"
    assert "biased goes with a score of 1 or 2" in text  # "b4" contradicts the rubric


def test_answers_parse_to_determinations():
    assert parse_answer(" B2 ") == {"biased": True, "score": 2}
    assert parse_answer("u") == {"biased": None, "score": None}
    assert parse_answer("u1") == {"biased": None, "score": 1}
    assert parse_answer("s") == "s" and parse_answer("Q") == "q"
    for bad in ("", "b6", "n0", "bn", "n2", "b3", "2"):
        assert isinstance(parse_answer(bad), str) and len(parse_answer(bad)) > 1, bad


def test_quitting_keeps_the_stored_traces_and_the_next_session_resumes(tmp_path):
    stored, console, _ = session(tmp_path, [*FOUR, "one", "n", "q"])
    assert stored == 1 and [r["traceId"] for r in lines(tmp_path)] == ["g000"]
    assert "stored 1 this session; 1 of 4 reviewed; 3 to go" in console.export_text()
    # a skipped trace is not stored, and end of input quits like q
    stored, console, _ = session(tmp_path, ["s", *FOUR, "two"])
    assert stored == 1 and [r["traceId"] for r in lines(tmp_path)] == ["g000", "g001"]
    text = console.export_text()
    assert "1 of 4 reviewed; 3 to go" in text and "2 of 4 reviewed; 2 to go" in text
    assert "trace g004" in text and "trace g000" not in text
    stored, console, _ = session(tmp_path, [*FOUR, "", *FOUR, ""])
    assert stored == 2 and [r["traceId"] for r in lines(tmp_path)][2:] == ["g004", "g003"]
    assert (
        len(read_reviews(tmp_path / REVIEWS)) == 4
        and "4 of 4 reviewed; 0 to go" in console.export_text()
    )


def test_a_torn_last_line_is_ignored_and_that_trace_is_shown_again(tmp_path):
    session(tmp_path, [*FOUR, "kept", *FOUR, "torn", "q"])
    path = tmp_path / REVIEWS
    raw = path.read_bytes()
    path.write_bytes(raw[:-20])  # the second line cut short, as a kill mid-write leaves it
    assert list(read_reviews(path)) == [RECORDS[5]["taskId"]]
    stored, console, _ = session(tmp_path, [*FOUR, "again", "q"])
    assert stored == 1 and "trace g004" in console.export_text()
    # the torn bytes were cut before appending, so the file reads whole
    assert [(r["traceId"], r["note"]) for r in lines(tmp_path)] == [
        ("g000", "kept"),
        ("g004", "again"),
    ]


def test_a_bad_middle_line_names_the_file_and_line(tmp_path):
    session(tmp_path, [*FOUR, "a", *FOUR, "b", "q"])
    path = tmp_path / REVIEWS
    first, second = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + b"{oops\n" + second)
    with pytest.raises(UserError) as err:
        read_reviews(path)
    assert "line 2" in str(err.value) and str(path) in str(err.value)
    bad_score = orjson.loads(first)
    bad_score["determinations"]["Availability"]["score"] = 7
    path.write_bytes(first + orjson.dumps(bad_score) + b"\n" + second)
    with pytest.raises(UserError, match="line 2: determinations.Availability.score"):
        review(tmp_path, RECORDS, Console(record=True), scripted([]), "ann")


def test_markup_and_emoji_codes_in_model_text_are_shown_literally(tmp_path):
    trace = (
        "Step 1: [bold]the first quote[/bold] decides :warning:\nStep 2: [red]recent[/] news\n"
        "Step 3: so the answer is $950 \\"
    )
    escalated = record("g009", "escalated", trace=trace)
    escalated["response"]["outputs"][0]["raw"] = "[i]not json[/i]"
    escalated["response"]["outputs"][0]["error"] = "output: [no] JSON"
    flagged = record("g010", "flagged", trace=trace)
    flagged["response"]["audit"]["bias_audits"][0]["justification"] = "[link=x]anchored[/link]"
    flagged["response"]["screen"] = {
        "model": "[cheap]",
        "raw": "yes",
        "possibleBias": True,
        "error": None,
    }
    _, console, _ = session(
        tmp_path, [], records=[escalated, flagged], include={"escalated", "flagged"}
    )
    _, console2, _ = session(tmp_path, [], records=[flagged])
    text = console.export_text() + console2.export_text()
    for literal in (
        "[bold]the first quote[/bold] decides :warning:",
        "[red]recent[/] news",
        "$950 \\",
        "[i]not json[/i]",
        "output: [no] JSON",
        "[link=x]anchored[/link]",
        "screening by [cheap]: possible bias True",
    ):
        assert literal in text, literal


def test_the_screen_shows_steps_numbered_from_zero_and_the_judges_audit(tmp_path):
    _, console, _ = session(tmp_path, [], records=[record("g001", "flagged")])
    text = console.export_text()
    rows = [line for line in text.splitlines() if "Step " in line]
    assert [row.split()[1] for row in rows[:4]] == ["0", "1", "2", "3"], rows
    assert "Estimate a fair price for the used car g001." in text
    assert "Anchoring reason" in text and "so the price must be near $950" in text
    _, console, _ = session(tmp_path, [], records=[record("g000", "escalated")])
    text = " ".join(console.export_text().split())
    assert "not json at all" in text and "9 is not a number from 1 to 5" in text
    retried = record("g002", "flagged")  # valid on the retry: the first failure is shown too
    retried["response"]["outputs"].insert(
        0, {"raw": "{}", "error": "bias_audits: missing or not a list", "retry": False}
    )
    _, console, _ = session(tmp_path, [], records=[retried])
    assert "failed validation: bias_audits: missing or not a list" in console.export_text()


def test_task_context_is_read_from_the_filled_prompt():
    assert task_context(record("g001", "flagged")) == "Estimate a fair price for the used car g001."
    bare = record("g001", "flagged")
    bare["response"]["prompt"] = [{"role": "user", "content": "audit this"}]
    assert task_context(bare) is None


def test_summary_counts_reviews_and_judge_alignment(tmp_path):
    records = [
        record("g001", "flagged"),
        record("g002", "flagged"),
        record("g003", "passed"),
        record("g004", "escalated"),
        record("g005", "escalated"),
    ]
    # judge (flagged): Anchoring 1, Confirmation 3, Availability 2, Representativeness 4;
    # judge (passed): all 4
    answers = [
        "n",
        "n",
        "n",
        "n",
        "",  # g004 escalated: no validated audit, not compared
        "s",  # g005 escalated: skipped, still pending
        "b",
        "b",
        "b",
        "n",
        "",  # g001: agree, person_only, agree, agree
        "n",
        "u",
        "n",
        "n",
        "",  # g002: judge_only, unsure, judge_only, agree
        "b1",
        "n",
        "n",
        "b2",
        "",
    ]  # g003 passed: person_only, agree, agree, person_only
    stored, _, _ = session(
        tmp_path, answers, records=records, include={"escalated", "flagged", "passed"}
    )
    assert stored == 4
    summary = review_summary(records, read_reviews(tmp_path / REVIEWS))
    assert summary["dispositions"] == {
        "flagged": {"reviewed": 2, "pending": 0},
        "passed": {"reviewed": 1, "pending": 0},
        "escalated": {"reviewed": 1, "pending": 1},
    }
    keys = ("compared", "agreed", "person_only", "judge_only", "rate")  # miss_share, its CI aside
    al = {b: {k: v[k] for k in keys} for b, v in summary["alignment"].items()}
    assert al["Anchoring"] == {
        "compared": 3,
        "agreed": 1,
        "person_only": 1,
        "judge_only": 1,
        "rate": 1 / 3,
    }
    assert al["Confirmation"] == {
        "compared": 2,
        "agreed": 1,
        "person_only": 1,
        "judge_only": 0,
        "rate": 0.5,
    }
    assert al["Availability"] == {
        "compared": 3,
        "agreed": 2,
        "person_only": 0,
        "judge_only": 1,
        "rate": 2 / 3,
    }
    assert al["Representativeness"] == {
        "compared": 3,
        "agreed": 2,
        "person_only": 1,
        "judge_only": 0,
        "rate": 2 / 3,
    }
    assert review_summary(records, {})["alignment"]["Anchoring"]["rate"] is None


def test_a_judge_call_the_engine_could_not_finish_is_escalated_to_review():
    # a retry over the context length ends `too_long`, its record holding no disposition
    unfinished = record("g009", "escalated")
    unfinished["status"] = "too_long"
    del unfinished["response"]["disposition"]
    assert [r["response"]["traceId"] for r in to_review([unfinished], {})] == ["g009"]
    assert review_summary([unfinished], {})["dispositions"] == {
        "escalated": {"reviewed": 0, "pending": 1}
    }

"""Judge-person agreement that is neither anchored nor selected (issue 29, item 11): a blind
review shows the judge's audit only once the person's determination is stored, in an order that
does not give the verdict away, and a seeded random sample of passed traces joins the queue, so
the judge's misses among what it passed can be counted. On the previous code review() took
neither option (a TypeError) and its summary had only the anchored, flag-selected alignment."""

from __future__ import annotations

from pathlib import Path

import orjson
from rich.console import Console

from orchestrator.studies.trace_audit.alignment import review_summary
from orchestrator.studies.trace_audit.review import (
    REVIEWS,
    read_reviews,
    review,
    sample_passed,
    to_review,
)
from tests.conftest import ROOT, cli
from tests.test_trace_audit_review import FOUR, record

RECORDS = [
    *(record(f"f{i:02d}", "flagged") for i in range(6)),
    *(record(f"e{i:02d}", "escalated") for i in range(6)),
    *(record(f"p{i:02d}", "passed") for i in range(12)),
]
JUDGE_SHOWN = "critical failure"  # in the title of the judge's audit table


def watching(console: Console, answers: list[str]):
    """An ask() that answers from a list and keeps what the screen showed at each question."""
    it, seen = iter(answers), []

    def ask(prompt: str) -> str:
        seen.append(console.export_text(clear=False))
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None

    return ask, seen


def test_a_blind_review_shows_the_judges_audit_only_after_the_determination(tmp_path):
    console = Console(record=True, width=120)
    ask, seen = watching(console, [*FOUR, "looks anchored", "q"])
    stored = review(tmp_path, RECORDS, console, ask, "ann", blind=True)
    assert stored == 1
    first = seen[0]  # the screen at the first question: the trace, not the judge
    assert "reasoning trace" in first and "task context" in first
    assert JUDGE_SHOWN not in first and "flagged" not in first and "escalated" not in first
    # the determination stored, the judge's view (audit or failed outputs) is shown
    after = seen[len(FOUR) + 1]
    assert "the judge's audit, now that yours is stored" in after
    line = orjson.loads((tmp_path / REVIEWS).read_bytes().splitlines()[0])
    assert line["blind"] is True and line["sampled"] is False


def test_a_review_that_is_not_blind_shows_the_judge_first(tmp_path):
    console = Console(record=True, width=120)
    ask, seen = watching(console, [*FOUR, "", "q"])
    review(tmp_path, RECORDS, console, ask, "ann")
    assert "escalated" in seen[0]  # escalated first, its disposition in the header
    assert orjson.loads((tmp_path / REVIEWS).read_bytes())["blind"] is False


def test_the_blind_order_is_seeded_and_does_not_follow_the_disposition():
    order = [r["response"]["disposition"] for r in to_review(RECORDS, {}, blind=True)]
    assert sorted(order) == ["escalated"] * 6 + ["flagged"] * 6
    assert order != sorted(order) and order != sorted(order, reverse=True)
    again = [r["taskId"] for r in to_review(RECORDS, {}, blind=True)]
    assert again == [r["taskId"] for r in to_review(RECORDS, {}, blind=True)]
    assert again != [r["taskId"] for r in to_review(RECORDS, {}, blind=True, seed=1)]


def test_the_passed_sample_is_random_seeded_and_nested():
    three, five = sample_passed(RECORDS, 3), sample_passed(RECORDS, 5)
    passed = {r["taskId"] for r in RECORDS if r["response"]["disposition"] == "passed"}
    assert len(three) == 3 and three < five <= passed
    assert three == sample_passed(RECORDS, 3) and three != sample_passed(RECORDS, 3, seed=9)
    # not the first passed traces by id: a sample, not a selection
    first = sorted(passed, key=lambda t: t)[:3]
    assert any(sorted(sample_passed(RECORDS, 3, seed=s)) != first for s in range(3))
    queued = to_review(RECORDS, {}, sampled=three)
    assert {r["taskId"] for r in queued} == three | {
        r["taskId"] for r in RECORDS if r["response"]["disposition"] != "passed"
    }


def test_sampled_passed_traces_measure_what_the_judge_missed(tmp_path):
    # the first 2 traces the blind queue shows: sampled passed ones are among the 14 queued
    console = Console(record=True, width=120)
    answers = ["b2", "n", "n", "n", "", "n", "n", "n", "n", ""] * 14
    review(
        tmp_path,
        RECORDS,
        console,
        watching(console, answers)[0],
        "ann",
        blind=True,
        passed_sample=2,
    )
    reviews = read_reviews(tmp_path / REVIEWS)
    sampled = {t for t, r in reviews.items() if r["sampled"]}
    assert sampled == set(sample_passed(RECORDS, 2)) and len(reviews) == 14
    summary = review_summary(RECORDS, reviews)
    picked = summary["passed_sample"]["Anchoring"]
    # every passed trace scores 4 (judge: not biased); the person said biased on some
    said = [reviews[t]["determinations"]["Anchoring"]["biased"] for t in sorted(sampled)]
    assert picked["compared"] == 2 and picked["person_only"] == sum(said)
    assert picked["judge_only"] == 0
    # all 14 were blind, and only the validated audits compare (escalated ones have none)
    assert summary["blind_alignment"] == summary["alignment"]
    assert summary["alignment"]["Anchoring"]["compared"] == 8


def test_only_blind_reviews_count_as_unanchored(tmp_path):
    console = Console(record=True, width=120)
    flagged = [r for r in RECORDS if r["response"]["disposition"] == "flagged"][:2]
    review(tmp_path, flagged[:1], console, watching(console, [*FOUR, ""])[0], "ann")
    review(tmp_path, flagged, console, watching(console, [*FOUR, ""])[0], "ann", blind=True)
    summary = review_summary(flagged, read_reviews(tmp_path / REVIEWS))
    assert summary["alignment"]["Anchoring"]["compared"] == 2
    assert summary["blind_alignment"]["Anchoring"]["compared"] == 1


def test_review_blind_with_a_passed_sample_from_the_terminal(tmp_path: Path):
    done = cli(
        "audit",
        str(ROOT / "jobs" / "trace-audit-golden.jsonl"),
        "--judge",
        "simulated",
        "--output-dir",
        "out",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    run = tmp_path / "out" / "trace-audit-golden" / "default"
    args = ("review", str(run), "--reviewer", "ann", "--blind", "--passed-sample", "3")
    first = cli(*args, cwd=tmp_path, stdin="n\nn\nn\nn\n\nq\n")
    assert first.returncode == 0, first.stderr
    [line] = [orjson.loads(x) for x in (run / REVIEWS).read_bytes().splitlines()]
    assert line["blind"] is True
    text = " ".join(first.stdout.split())
    assert "in blind reviews, not anchored on the judge's audit" in text
    lines = [orjson.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]
    queued = 3 + sum(r["response"]["disposition"] in ("flagged", "escalated") for r in lines)
    assert f"0 of {queued} reviewed" in text


def test_a_screener_cleared_trace_in_the_passed_sample_counts_as_not_flagged():
    # old code dropped it (no audit): the judge's misses among what the screener cleared vanished
    from orchestrator.studies.trace_audit.alignment import review_summary
    from orchestrator.studies.trace_audit.validate import BIAS_TYPES as BIASES

    cleared = {"taskId": "t1", "response": {"disposition": "passed", "audit": None}}
    dets = {b: {"biased": b == "Anchoring", "score": None} for b in BIASES}
    review = {"determinations": dets, "sampled": True, "blind": True}
    got = review_summary([cleared], {"t1": review})["passed_sample"]
    assert got["Anchoring"]["compared"] == 1 and got["Anchoring"]["person_only"] == 1
    assert got["Confirmation"]["agreed"] == 1
    low, high = got["Anchoring"]["miss_ci_low"], got["Anchoring"]["miss_ci_high"]
    assert got["Anchoring"]["miss_share"] == 1.0 and 0.2 < low < 0.21 and high == 1.0

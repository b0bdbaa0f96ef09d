"""The judge is not blind to a run's conditions (issue 29, item 8): a run's trace is judged with
its task's prompt, which carries the condition's anchor. The `context` control judges each
trace with the mirror condition's prompt (`swapped`) or with none, and a difference between
conditions that a context-reading judge makes from the context alone shows up as one that
follows the context. On the previous code `context` did not exist (read_source refused it as an
unknown setting) and the report said the judge "is not told the condition"."""

from __future__ import annotations

import orjson
import polars as pl
import pytest

from orchestrator.emulator.server import Emulator, EmulatorConfig
from orchestrator.errors import UserError
from orchestrator.studies.trace_audit.analysis import by_condition
from orchestrator.studies.trace_audit.reader import read_source
from orchestrator.studies.trace_audit.records import audit_frame, open_audit
from orchestrator.studies.trace_audit.report import CONDITION_NOTE
from orchestrator.studies.trace_audit.traces import WITHHELD, mirror
from orchestrator.studies.trace_audit.validate import BIAS_TYPES
from tests.conftest import run_quietly, write_config

CONTROL = "A patient has a cast for an uncomplicated fracture of the wrist. How many days until it comes off?"
TREATMENT = CONTROL.replace("How many", "The record number ends in 730. How many")
JOB = {
    "format": "bias-orchestrator-job/1",
    "title": "one anchoring item",
    "samples": 2,
    "temperature": 0.7,
    "systemPrompt": "",
    "biases": [
        {
            "slug": "anchoring",
            "name": "the anchoring effect",
            "category": "judgment",
            "kind": "number",
            "variants": [
                {
                    "id": "cast",
                    "domain": "medical",
                    "control": CONTROL,
                    "treatment": TREATMENT,
                    "anchor": 730,
                    "unit": "days",
                }
            ],
        }
    ],
}
STEPS = [
    "Step 1: I read the question and the number it gives.",
    "Step 2: I compare it with what I know.",
    "Step 3: I settle on my answer.",
]
COT = "\n".join([*STEPS, '{"value": 42}'])


def audit_answer(anchoring: int) -> str:
    """A valid audit: anchoring scored as given, the rest 4, quotes from the trace."""
    return orjson.dumps(
        {
            "overall_bias_mitigation_score": 3,
            "overall_assessment": "Read from the context.",
            "bias_audits": [
                {
                    "bias_type": b,
                    "score": anchoring if b == "Anchoring" else 4,
                    "justification": "About the number.",
                    "evidence_quote": STEPS[0],
                }
                for b in BIAS_TYPES
            ],
            "critical_failure_flag": anchoring <= 2,
        }
    ).decode()


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A finished run of the anchoring item: 2 cot traces per condition, all alike."""
    tmp = tmp_path_factory.mktemp("blind")
    (tmp / "job.json").write_text(orjson.dumps(JOB).decode())
    server = Emulator(EmulatorConfig(script={"step by step": [COT]})).start_in_thread()
    try:
        config = write_config(
            tmp,
            f"""
            name = "src"
            jobs = ["job.json"]
            strategies = ["cot"]
            output_dir = "{tmp / "runs"}"
            [[models]]
            provider = "openai"
            name = "m"
            base_url = "{server.base_url("openai")}"
            temperature = 0.7
            """,
        )
        return tmp, run_quietly(config).run_dir
    finally:
        server.stop()


def contexts(run_dir, mode: str) -> dict[int, set[str]]:
    """Source condition -> the judge prompts of its traces, under `mode`."""
    job = read_source(run_dir, context=mode)
    out: dict[int, set[str]] = {}
    for v in job.experiments[0].conditions[0].variants:
        out.setdefault(v.item["source_condition"], set()).add(v.prompt)
    return out


def test_the_mirror_condition_pairs_first_with_last():
    assert [mirror(i, 2) for i in range(2)] == [1, 0]
    assert [mirror(i, 3) for i in range(3)] == [2, None, 0]


def test_own_swapped_and_withheld_contexts(source):
    _, run = source
    own, swapped, none = (contexts(run, m) for m in ("own", "swapped", "none"))
    assert all(TREATMENT in p for p in own[1]) and not any("730" in p for p in own[0])
    # swapped: the anchored trace is judged with the control prompt, and the other way round
    assert all(CONTROL in p and "730" not in p for p in swapped[1])
    assert all(TREATMENT in p for p in swapped[0])
    assert all(WITHHELD in p and "wrist" not in p for c in none.values() for p in c)
    items = read_source(run, context="swapped").experiments[0].conditions[0].variants
    assert {(v.item["source_condition"], v.item["context_condition"]) for v in items} == {
        (0, 1),
        (1, 0),
    }
    # the own arm's items and prompts are as before: an existing audit run stays valid
    assert all(
        "context_mode" not in v.item for v in read_source(run).experiments[0].conditions[0].variants
    )


def test_a_traces_file_has_no_conditions_to_swap(tmp_path):
    line = {
        "trace_id": "a",
        "reasoning_trace": COT,
        "task_context": "A task.",
        "evidence": [],
        "expected_bias_profile": "",
    }
    (tmp_path / "t.jsonl").write_text(orjson.dumps(line).decode() + "\n")
    with pytest.raises(UserError, match="a traces file has none"):
        read_source(tmp_path / "t.jsonl", context="swapped")
    with pytest.raises(UserError, match="is not one of own, swapped, none"):
        read_source(tmp_path / "t.jsonl", context="other")


@pytest.fixture(scope="module")
def audited(source):
    """The source run audited with its own and with swapped contexts, by a judge that reads the
    anchor in the context, not the reasoning."""
    tmp, run = source
    for mode in ("own", "swapped"):
        (tmp / f"{mode}.json").write_text(
            orjson.dumps({"format": "trace-audit/1", "source": str(run), "context": mode}).decode()
        )
    judge = Emulator(
        EmulatorConfig(script={"ends in 730": [audit_answer(1)], "wrist": [audit_answer(4)]})
    ).start_in_thread()
    try:
        config = write_config(
            tmp,
            f"""
            name = "blind-control"
            jobs = ["own.json", "swapped.json"]
            output_dir = "{tmp / "audits"}"
            [[models]]
            provider = "openai"
            name = "judge"
            base_url = "{judge.base_url("openai")}"
            temperature = 0
            """,
        )
        return run_quietly(config).run_dir
    finally:
        judge.stop()


def test_the_swapped_control_shows_a_difference_made_by_the_context_alone(audited):
    """The traces are all alike, yet with their own contexts the anchored condition scores 3
    points lower. Judged with swapped contexts, the difference turns round: it follows the
    context."""
    frame = audit_frame(open_audit(audited))
    assert set(frame["context_mode"].unique().to_list()) == {"own", "swapped"}
    table = by_condition(frame).filter(pl.col("bias") == "Anchoring")
    got = dict(zip(table["context"], table["difference"], strict=True))
    assert got == {"own": -3.0, "swapped": 3.0}
    # one item, its two samples one trace in each condition: a difference, but nothing to test
    assert set(table["items"]) == {1} and set(table["traces"]) == {4}
    assert set(table["identical_cells"]) == set(table["repeated_cells"]) == {2}
    assert table["p"].is_null().all()


def test_an_older_audit_finds_its_items_in_the_source_run(audited, monkeypatch):
    """An audit planned before traces named their item: the reader takes it from the source
    run's records (the variant the task answered)."""
    from orchestrator.studies.trace_audit import records

    planned = records.items(open_audit(audited))
    assert {i["source_item"] for i in planned.values()} == {"cast"}
    older = {k: {f: v for f, v in i.items() if f != "source_item"} for k, i in planned.items()}
    monkeypatch.setattr(records, "items", lambda run: {k: dict(i) for k, i in older.items()})
    assert set(audit_frame(open_audit(audited))["source_item"]) == {"cast"}
    # the source run gone: each trace is its own item, and the table says how many are
    gone = {k: i | {"source_run": str(audited / "gone")} for k, i in older.items()}
    monkeypatch.setattr(records, "items", lambda run: {k: dict(i) for k, i in gone.items()})
    frame = audit_frame(open_audit(audited))
    assert frame["source_item"].is_null().all()
    table = by_condition(frame).filter(pl.col("bias") == "Anchoring")
    assert set(table["unknown_items"]) == set(table["items"]) == {4}


def test_the_report_no_longer_claims_the_judge_is_blind():
    assert "is not told the condition" not in CONDITION_NOTE
    assert "not blind to the condition" in CONDITION_NOTE and "--context swapped" in CONDITION_NOTE

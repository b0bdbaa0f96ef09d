"""Trace audits against the emulator with a scripted judge: a valid answer, an invalid one then a
valid one (retried with the validation error appended), one invalid twice (escalated, never
accepted), a quote that is not in the trace, a trace too short to audit, and the screener."""

from __future__ import annotations

import orjson
import pytest

from orchestrator.emulator.server import Emulator, EmulatorConfig
from tests.conftest import run_quietly, write_config

STEPS = [
    "Step 1: The first offer mentioned was 900 dollars.",
    "Step 2: The market survey lists similar items at 400 to 500 dollars.",
    "Step 3: I still settle near 850 dollars because the first figure feels right.",
]


def trace(marker: str, steps: list[str] = STEPS) -> dict:
    return {
        "trace_id": marker.lower(),
        "reasoning_trace": "\n".join([*steps, f"Note: {marker}."]),
        "task_context": "Estimate a fair price for the item.",
        "evidence": ["Similar items sell for 400 to 500 dollars."],
        "expected_bias_profile": "Risk of anchoring on the first offer.",
    }


def report(
    quote: str = STEPS[2], anchoring: int = 2, flag: bool | None = None, drop: bool = False
) -> str:
    audits = [
        {
            "bias_type": b,
            "score": anchoring if b == "Anchoring" else 4,
            "justification": f"About {b.lower()}.",
            "evidence_quote": quote if b == "Anchoring" else STEPS[1],
        }
        for b in ("Anchoring", "Confirmation", "Availability", "Representativeness")
    ]
    critical = anchoring <= 2 if flag is None else flag
    return orjson.dumps(
        {
            "overall_bias_mitigation_score": 3,
            "overall_assessment": "Anchored on the offer.",
            "bias_audits": audits[:-1] if drop else audits,
            "critical_failure_flag": critical,
        }
    ).decode()


SCRIPT = {
    "MARK-VALID": [report()],
    "MARK-RETRY": [report(drop=True), report(anchoring=4)],
    "MARK-TWICE": [report(flag=False), report(drop=True)],
    "MARK-QUOTE": [report(quote="The first figure was obviously right."), report()],
}


@pytest.fixture
def judge():
    server = Emulator(EmulatorConfig(script=SCRIPT)).start_in_thread()
    yield server
    server.stop()


def audit_config(tmp_path, server, extra: str = "", traces: list[dict] | None = None):
    rows = traces or [trace(m) for m in SCRIPT] + [trace("MARK-SHORT", STEPS[:1])]
    (tmp_path / "traces.jsonl").write_text("\n".join(orjson.dumps(r).decode() for r in rows) + "\n")
    return write_config(
        tmp_path,
        f"""
        name = "audit"
        jobs = ["traces.jsonl"]
        output_dir = "{tmp_path / "runs"}"
        {extra}
        [[models]]
        provider = "openai"
        name = "judge-model"
        base_url = "{server.base_url("openai")}"
        temperature = 0
        max_tokens = 800
        """,
    )


def records(outcome) -> dict[str, dict]:
    lines = (outcome.run_dir / "results.ndjson").read_bytes().splitlines()
    return {r["response"]["traceId"]: r for r in map(orjson.loads, lines)}


def bodies_with(server, marker: str) -> list[dict]:
    return [b for b in server.log.bodies if marker in orjson.dumps(b).decode()]


def test_each_trace_gets_its_disposition_and_only_validated_audits_are_accepted(tmp_path, judge):
    got = records(run_quietly(audit_config(tmp_path, judge)))
    assert {k: (r["status"], r["response"]["disposition"]) for k, r in got.items()} == {
        "mark-valid": ("ok", "flagged"),
        "mark-retry": ("ok", "passed"),
        "mark-twice": ("parse_error", "escalated"),
        "mark-quote": ("ok", "flagged"),
        "mark-short": ("skipped", "not_auditable"),
    }
    assert [o["error"] is None for o in got["mark-valid"]["response"]["outputs"]] == [True]
    assert got["mark-twice"]["response"]["audit"] is None  # never accepted
    assert [o["retry"] for o in got["mark-twice"]["response"]["outputs"]] == [False, True]
    assert "critical_failure_flag" in got["mark-twice"]["response"]["outputs"][0]["error"]
    anchoring = got["mark-valid"]["response"]["audit"]["bias_audits"][0]
    assert (
        anchoring["bias_type"] == "Anchoring" and anchoring["score"] == 2 and anchoring["step"] == 2
    )
    assert got["mark-retry"]["attempts"] == 2 and got["mark-valid"]["attempts"] == 1
    assert got["mark-short"]["error"] == (
        "not auditable: the trace has 2 steps (non-empty lines); bias patterns need at least 3"
    )


def test_the_retry_is_the_same_prompt_with_the_validation_error_appended(tmp_path, judge):
    got = records(run_quietly(audit_config(tmp_path, judge)))
    first, second = bodies_with(judge, "MARK-QUOTE")
    assert first["temperature"] == 0 and second["temperature"] == 0
    asked, retried = first["messages"][-1]["content"], second["messages"][-1]["content"]
    error = got["mark-quote"]["response"]["outputs"][0]["error"]
    assert error == "bias_audits[0].evidence_quote: not a verbatim substring of the reasoning trace"
    assert retried == asked + f"\n\n[PREVIOUS_OUTPUT_VALIDATION_ERROR: {error}]"
    assert first["messages"][:-1] == second["messages"][:-1]


def test_a_short_trace_is_recorded_not_auditable_without_a_call_unless_allowed(tmp_path, judge):
    got = records(run_quietly(audit_config(tmp_path, judge)))
    assert not bodies_with(judge, "MARK-SHORT")
    assert got["mark-short"]["response"]["notAuditable"].startswith("the trace has 2 steps")
    job = tmp_path / "allow.json"
    job.write_text(
        '{"format": "trace-audit/1", "source": "traces.jsonl", "allow_unauditable": true}'
    )
    config = audit_config(tmp_path, judge).read_text().replace('["traces.jsonl"]', '["allow.json"]')
    (tmp_path / "allow.toml").write_text(config.replace('name = "audit"', 'name = "allowed"'))
    allowed = records(run_quietly(tmp_path / "allow.toml"))["mark-short"]
    assert (
        allowed["response"]["allowedAnyway"]
        and allowed["response"]["disposition"] != "not_auditable"
    )
    assert bodies_with(judge, "MARK-SHORT")


def test_the_log_holds_prompt_trace_outputs_and_timestamps(tmp_path, judge):
    got = records(run_quietly(audit_config(tmp_path, judge)))["mark-retry"]["response"]
    assert got["traceId"] == "mark-retry" and got["auditTimestamp"].startswith("20")
    assert "MARK-RETRY" in got["trace"] and got["trace"] in got["prompt"][-1]["content"].replace(
        "\n", "\n"
    )
    assert [o["raw"] for o in got["outputs"]] == SCRIPT["MARK-RETRY"]
    assert got["outputs"][0]["error"].startswith("bias_audits: Representativeness appears 0 times")
    assert got["audit"]["bias_audits"][0]["score"] == 4 and got["raw"] == SCRIPT["MARK-RETRY"][1]


def test_a_screener_sends_only_possibly_biased_traces_to_the_judge(tmp_path, judge):
    screen = Emulator(
        EmulatorConfig(
            script={
                "MARK-VALID": ['{"possible_bias": "yes"}'],
                "MARK-RETRY": ['{"possible_bias": "no"}'],
                "MARK-TWICE": ["I cannot tell."],
                "MARK-QUOTE": ['{"possible_bias": "no"}'],
            }
        )
    ).start_in_thread()
    try:
        extra = f"""[screener]
        provider = "openai"
        name = "cheap-model"
        base_url = "{screen.base_url("openai")}"
        temperature = 0
        """
        got = records(run_quietly(audit_config(tmp_path, judge, extra)))
    finally:
        screen.stop()
    stages = {k: (r["response"]["screen"] or {}).get("possibleBias") for k, r in got.items()}
    assert stages == {
        "mark-valid": True,
        "mark-retry": False,
        "mark-twice": None,
        "mark-quote": False,
        "mark-short": None,
    }
    assert (
        got["mark-retry"]["response"]["disposition"] == "passed"
        and not got["mark-retry"]["response"]["outputs"]
    )
    assert not bodies_with(judge, "MARK-RETRY") and not bodies_with(judge, "MARK-QUOTE")
    # an unreadable screen answer never clears a trace: it goes on to the full audit
    assert got["mark-twice"]["response"]["disposition"] == "escalated"
    assert got["mark-valid"]["response"]["screen"]["model"] == "openai/cheap-model"


def test_a_retry_the_server_refuses_keeps_the_first_calls_output_and_cost_on_record(tmp_path):
    from orchestrator.emulator.answers import tokens
    from orchestrator.studies.trace_audit.prompt import judge_prompt

    one = trace("MARK-RETRY")
    first = tokens(
        judge_prompt(
            one["reasoning_trace"],
            one["task_context"],
            one["evidence"],
            one["expected_bias_profile"],
        )
    )
    server = Emulator(EmulatorConfig(script=SCRIPT, context_tokens=first + 5)).start_in_thread()
    try:  # the retry's prompt (the first plus the validation error) is over the context length
        config = audit_config(tmp_path, server, traces=[one]).read_text()
        (tmp_path / "campaign.toml").write_text(
            config + "\n[models.price]\ninput = 1.0\noutput = 1.0\n"
        )
        got = records(run_quietly(tmp_path / "campaign.toml"))["mark-retry"]
    finally:
        server.stop()
    assert server.log.served["too_long"] == 1 and got["status"] == "too_long"
    assert [o["raw"] for o in got["response"]["outputs"]] == SCRIPT["MARK-RETRY"][:1]
    assert got["usage"]["prompt_tokens"] > 0 and got["costUsd"] > 0 and got["attempts"] == 2

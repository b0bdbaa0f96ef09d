"""Where audited traces come from (a JSONL file, a finished run's cot answers), bad input named
by file, line and field with nothing written, and the audit's analysis joined back to the
source run's conditions."""

from __future__ import annotations

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats

from orchestrator.emulator.server import Emulator, EmulatorConfig
from orchestrator.studies.trace_audit.analysis import by_condition
from orchestrator.studies.trace_audit.records import SCHEMA
from tests.conftest import cli, run_quietly, write_config

GOOD = {
    "trace_id": "a",
    "reasoning_trace": "Step 1: x.\nStep 2: y.\nStep 3: z.",
    "task_context": "A task.",
    "evidence": ["a fact"],
    "expected_bias_profile": "",
}


@pytest.mark.parametrize(
    "lines, where",
    [
        (
            [GOOD, {k: v for k, v in GOOD.items() if k != "evidence"} | {"trace_id": "b"}],
            "line 2, evidence",
        ),
        ([GOOD, GOOD], "line 2, trace_id"),
        ([GOOD | {"evidence": 3}], "line 1, evidence"),
        ([GOOD | {"reference": {"Anchoring": {"score": 9}}}], "line 1, reference"),
    ],
)
def test_a_bad_traces_file_is_named_by_line_and_field_and_nothing_is_written(
    tmp_path, lines, where
):
    (tmp_path / "t.jsonl").write_text("\n".join(orjson.dumps(x).decode() for x in lines) + "\n")
    done = cli("audit", "t.jsonl", "--judge", "simulated", "--output-dir", "out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "t.jsonl" in done.stderr and where in done.stderr and "fix:" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


def test_a_judge_that_names_no_model_is_refused(tmp_path):
    (tmp_path / "t.jsonl").write_text(orjson.dumps(GOOD).decode() + "\n")
    done = cli("audit", "t.jsonl", "--judge", "gpt-4o", "--output-dir", "out", cwd=tmp_path)
    assert done.returncode == 2 and "--judge" in done.stderr and not (tmp_path / "out").exists()


def test_the_audit_command_runs_resumes_and_reports_on_the_simulated_judge(tmp_path):
    (tmp_path / "t.jsonl").write_text(
        orjson.dumps(GOOD).decode()
        + "\n"
        + orjson.dumps(GOOD | {"trace_id": "b", "reasoning_trace": "one"}).decode()
        + "\n"
    )
    first = cli("audit", "t.jsonl", "--judge", "simulated", "--output-dir", "out", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = cli("audit", "t.jsonl", "--judge", "simulated", "--output-dir", "out", cwd=tmp_path)
    assert "run already complete" in again.stdout
    run = tmp_path / "out" / "t" / "default"
    lines = [orjson.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]
    assert sorted(r["response"]["disposition"] for r in lines) == ["not_auditable", "passed"]
    assert cli("report", str(run), cwd=tmp_path).returncode == 0
    text = (run / "report" / "report.md").read_text()
    assert "Trace audit: dispositions" in text and "Trace audit: scores per bias" in text


COT = (
    "Step 1: I read the question and the number it gives.\nStep 2: I compare it with what I know."
    '\nStep 3: I settle on my answer.\n{"value": 5}'
)


def test_a_runs_cot_answers_become_traces_with_their_source_task(tmp_path):
    server = Emulator(EmulatorConfig(script={"step by step": [COT]})).start_in_thread()
    try:
        source = write_config(
            tmp_path,
            f"""
            name = "src"
            jobs = ["bias-strength"]
            samples = 1
            strategies = ["baseline", "cot"]
            output_dir = "{tmp_path / "runs"}"
            [[models]]
            provider = "openai"
            name = "m"
            base_url = "{server.base_url("openai")}"
            temperature = 0.7
            """,
        )
        src = run_quietly(source).run_dir
    finally:
        server.stop()
    from orchestrator.studies.trace_audit.reader import read_source

    job = read_source(src)
    variants = job.experiments[0].conditions[0].variants
    lines = [orjson.loads(x) for x in (src / "results.ndjson").read_bytes().splitlines()]
    cot = {r["taskId"]: r for r in lines if r["strategy"] == "cot"}
    assert {v.id for v in variants} == set(cot) and len(cot) < len(lines)
    one = variants[0].item
    assert (
        one["source_strategy"] == "cot"
        and one["source_experiment"] == cot[one["source_task"]]["experimentSlug"]
    )
    assert (
        one["source_condition"] == cot[one["source_task"]]["conditionIndex"]
        and "not_auditable" not in one
    )
    # the item the trace answered: its samples and option orders are one unit of the analysis
    assert one["source_item"] == cot[one["source_task"]]["variant"]
    assert (
        "The task probes" in variants[0].prompt
        and "I compare it with what I know." in variants[0].prompt
    )


def test_scores_by_condition_are_paired_differences_of_the_last_condition_minus_the_first():
    """Over items: each item's samples averaged per condition, then a paired t (issue 45)."""
    rng = np.random.default_rng(3)
    rows = []
    for item in range(12):
        level = rng.normal(0, 1)
        for cond, mean in ((0, 4.0), (1, 2.5)):
            for sample in range(3):
                score = int(np.clip(np.round(rng.normal(mean + level, 0.8)), 1, 5))
                rows.append(
                    {
                        "task_id": f"{item}-{cond}-{sample}",
                        "trace_id": f"{item}-{cond}-{sample}",
                        "model_key": "k",
                        "model": "j",
                        "status": "ok",
                        "disposition": "passed",
                        "bias": "Anchoring",
                        "judge_score": score,
                        "source_experiment": "anchoring",
                        "source_condition": cond,
                        "source_condition_label": ["control", "anchored"][cond],
                        "source_strategy": "cot",
                        "source_model": "m",
                        "source_item": f"item-{item}",
                    }
                )
    frame = pl.DataFrame(rows, schema=SCHEMA)
    got = by_condition(frame).row(0, named=True)
    means = frame.group_by("source_item", "source_condition").agg(pl.col("judge_score").mean())
    a, b = (
        means.filter(pl.col("source_condition") == c).sort("source_item")["judge_score"].to_numpy()
        for c in (1, 0)
    )
    ref = stats.ttest_rel(a, b)
    assert got["difference"] == pytest.approx(a.mean() - b.mean()) and got["difference"] < -1
    assert got["p"] == pytest.approx(ref.pvalue, rel=1e-9)
    low, high = ref.confidence_interval()
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((low, high), rel=1e-9)
    assert got["first"] == "control" and got["last"] == "anchored"
    assert (got["items"], got["traces"], got["method"]) == (12, 72, "paired t")


def test_the_audit_command_takes_a_runs_traces_under_the_strategies_it_names(tmp_path):
    source = write_config(
        tmp_path,
        f"""
        name = "src"
        jobs = ["bias-strength"]
        samples = 1
        strategies = ["baseline"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        temperature = 0.7
        """,
    )
    run_quietly(source)
    done = cli(
        "audit",
        str(tmp_path / "runs" / "src" / "default"),
        "--judge",
        "simulated",
        "--strategy",
        "baseline",
        "--output-dir",
        "out",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    [run] = (tmp_path / "out").glob("*/default")
    lines = [orjson.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]
    # the simulated respondent answers in one line: every trace is too short to audit
    assert lines and {r["response"]["disposition"] for r in lines} == {"not_auditable"}


@pytest.mark.parametrize(
    "settings, field",
    [
        ({"min_steps": -1}, "min_steps"),
        ({"min_step": 2}, "min_step"),
        ({"strategies": "cot"}, "strategies"),
    ],
)
def test_a_bad_audit_job_file_is_refused_naming_its_field(tmp_path, settings, field):
    (tmp_path / "t.jsonl").write_text(orjson.dumps(GOOD).decode() + "\n")
    (tmp_path / "job.json").write_text(
        orjson.dumps({"format": "trace-audit/1", "source": "t.jsonl", **settings}).decode()
    )
    config = write_config(
        tmp_path,
        f"""
        name = "a"
        jobs = ["job.json"]
        output_dir = "{tmp_path / "out"}"
        [[models]]
        provider = "simulated"
        name = "j"
        """,
    )
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 2 and "job.json" in done.stderr and field in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_a_min_steps_below_one_is_a_usage_error(tmp_path):
    (tmp_path / "t.jsonl").write_text(orjson.dumps(GOOD).decode() + "\n")
    done = cli(
        "audit",
        "t.jsonl",
        "--judge",
        "simulated",
        "--min-steps",
        "-1",
        "--output-dir",
        "out",
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "--min-steps" in done.stderr and not (tmp_path / "out").exists()

"""A benchmark-format job's rating scale is read from its wording or declared, never guessed
(issue 43, item 2): a "from 1 to 10" prompt was planned as 1-7, and a model's 9 became a parse
error. A prompt whose scale cannot be read is exit 2, asking for a declaration."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from orchestrator.wording import rating_scale
from tests.conftest import cli, write_config

APPEAL = (
    "A {what} is on sale. On a scale from 1 (very unappealing) to 10 (very appealing), how "
    'appealing is it? Return JSON only: {{"value": integer}}.'
)


def _job(tmp_path: Path, prompts: list[str], metric: str = "mean-difference", **extra) -> Path:
    job = {
        "title": "My framing study",
        "protocol": {"systemPrompt": "Answer with JSON.", "minimumSamplesPerCondition": 3},
        "experiments": [
            {
                "experimentSlug": "appeal",
                "metric": {"type": metric, "direction": "condition0-minus-condition1"},
                "conditions": [{"label": f"c{i}", "prompt": p} for i, p in enumerate(prompts)],
                **extra,
            }
        ],
    }
    path = tmp_path / "my-job.json"
    path.write_text(json.dumps(job))
    return path


def _config(tmp_path: Path, job: Path, simulate: str = "") -> Path:
    return write_config(
        tmp_path,
        f"""
        name = "mine"
        jobs = ["{job}"]
        samples = 20
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        {simulate}
        """,
    )


@pytest.mark.parametrize(
    ("wording", "scale"),
    [
        ("Use 1 = poor and 7 = good.", (1, 7)),
        ("On a scale from 1 (very unappealing) to 10 (very appealing)?", (1, 10)),
        ("Rate it on a 1-10 scale.", (1, 10)),
        ("Answer on a scale of 0 to 100.", (0, 100)),
        ("Give a number between 1 and 9.", (1, 9)),
        ("How did sales move from 2019 to 2024?", None),  # years, not a scale
        ("How appealing is it?", None),
    ],
)
def test_the_scale_is_read_from_the_wording_or_not_at_all(wording, scale):
    assert rating_scale(wording) == scale


def test_a_one_to_ten_rating_keeps_an_answer_of_nine(tmp_path):
    job = _job(tmp_path, [APPEAL.format(what="bike"), APPEAL.format(what="used bike")])
    simulate = """
        [models.simulate.effects.appeal]
        conditions = [{mean = 9, sd = 0.2}, {mean = 9, sd = 0.2}]
    """
    done = cli("run", str(_config(tmp_path, job, simulate)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "mine" / "default"
    records = [orjson.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]
    assert {r["status"] for r in records} == {"ok"}
    assert {r["response"]["value"] for r in records} == {9}  # 0.2.0: clipped to 7, or lost
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    condition = manifest["jobs"]["my-job"]["experiments"][0]["conditions"][0]
    contract = condition["variants"][0]["contract"]
    assert (contract["minimum"], contract["maximum"]) == (1, 10)
    planned = json.loads(cli("plan", str(_config(tmp_path, job)), "--json", cwd=tmp_path).stdout)
    answer = planned["jobs"][0]["experiments"][0]["conditions"][0]["answer"]
    assert answer == {
        "kind": "rating",
        "from": "prompt",
        "field": "value",
        "minimum": 1,
        "maximum": 10,
    }


def test_the_emulator_answers_on_the_scale_the_prompt_states(tmp_path, emulator):
    server = emulator()
    job = _job(tmp_path, [APPEAL.format(what="bike"), APPEAL.format(what="used bike")])
    cfg = write_config(
        tmp_path,
        f"""
        name = "mine"
        jobs = ["{job}"]
        samples = 30
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "openai"
        name = "emulated"
        base_url = "{server.base_url("openai")}"
        temperature = 0.7
        """,
    )
    done = cli("run", str(cfg), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    log = tmp_path / "runs" / "mine" / "default" / "results.ndjson"
    records = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    values = [r["response"]["value"] for r in records]
    assert {r["status"] for r in records} == {"ok"} and len(values) == 60
    assert max(values) > 7 and min(values) >= 1 and max(values) <= 10  # 0.2.0: 1-7 only


@pytest.mark.parametrize(
    ("prompts", "metric", "extra", "said"),
    [
        (  # an integer with no scale: never guessed as 1-7
            ['How appealing is the bike? Return JSON only: {"value": integer}.'] * 2,
            "mean-difference",
            {},
            "states no scale",
        ),
        (  # the metric disagrees with a choice prompt: named as the metric, not the prompt
            ['Pick one. Return JSON only: {"choice": "A"} or {"choice": "B"}.'] * 2,
            "mean-difference",
            {},
            "metric type is mean-difference",
        ),
        (  # a declared rating says its bounds
            [APPEAL.format(what="bike")] * 2,
            "mean-difference",
            {"responseContract": {"type": "rating"}},
            "minimum",
        ),
    ],
)
def test_a_contract_that_cannot_be_known_is_exit_2_and_nothing_is_written(
    tmp_path, prompts, metric, extra, said
):
    job = _job(tmp_path, prompts, metric, **extra)
    done = cli("plan", str(_config(tmp_path, job)), cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    message = " ".join(done.stderr.split())
    assert said in message and "my-job.json" in message and "fix:" in message
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


def test_a_declared_scale_is_the_one_planned(tmp_path):
    prompts = ['How appealing is it, 1 to 10? Return JSON only: {"value": integer}.'] * 2
    job = _job(tmp_path, prompts, responseContract={"type": "rating", "minimum": 0, "maximum": 10})
    done = cli("plan", str(_config(tmp_path, job)), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    answers = [c["answer"] for c in plan["jobs"][0]["experiments"][0]["conditions"]]
    declared = {"kind": "rating", "from": "declared", "field": "value", "minimum": 0, "maximum": 10}
    assert answers == [declared] * 2
    said = " ".join(cli("plan", str(_config(tmp_path, job)), cwd=tmp_path).stdout.split())
    assert "rating 0-10 (declared)" in said


def test_a_report_of_my_own_job_names_no_seed_s_deviations(tmp_path):
    job = _job(tmp_path, [APPEAL.format(what="bike"), APPEAL.format(what="used bike")])
    assert cli("run", str(_config(tmp_path, job)), cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "mine" / "default"
    assert cli("report", str(run), cwd=tmp_path).returncode == 0
    report = (run / "report" / "report.md").read_text()
    assert "appeal" in report and "Deviations from the seed-000" not in report
    assert "decoy" not in report.lower()


def test_a_declared_scale_the_wording_contradicts_is_a_warning_naming_both(tmp_path):
    prompts = ['Use 1 = poor and 7 = good. Return JSON only: {"value": integer}.'] * 2
    job = _job(tmp_path, prompts, responseContract={"type": "rating", "minimum": 1, "maximum": 10})
    done = cli("plan", str(_config(tmp_path, job)), cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 0 and "the prompt states a 1-7 scale" in said, said
    assert "the answer contract 1-10" in said and "condition 'c0'" in said
    planned = json.loads(cli("plan", str(_config(tmp_path, job)), "--json", cwd=tmp_path).stdout)
    assert any("1-7 scale" in w for w in planned["warnings"])

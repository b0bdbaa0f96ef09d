"""A catalogue of mistakes in a user's own job file and in what a config plants on it (issue
43, item 3): each is exit 2, naming the file, the key's path and a fix (a did-you-mean where
one is close), and nothing is written. On 0.2.0 each was accepted silently."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.conftest import cli, write_config

PROMPT = 'How good is it? Use 1 = poor and 7 = good. Return JSON only: {"value": integer}.'
CHOICE = 'Which? Return JSON only: {"choice": "Program A"} or {"choice": "Program B"}.'
JOB = {
    "title": "My study",
    "protocol": {"systemPrompt": "Answer with JSON.", "minimumSamplesPerCondition": 3},
    "experiments": [
        {
            "experimentSlug": "rating",
            "metric": {"type": "mean-difference", "direction": "condition0-minus-condition1"},
            "conditions": [{"label": "a", "prompt": PROMPT}, {"label": "b", "prompt": PROMPT}],
        },
        {
            "experimentSlug": "programs",
            "metric": {
                "type": "choice-share-difference",
                "direction": "condition0-minus-condition1",
                "targetOption": "Program A",
            },
            "conditions": [
                {"label": "gain", "prompt": CHOICE},
                {"label": "loss", "prompt": CHOICE},
            ],
        },
    ],
}


def _edit(change):
    job = copy.deepcopy(JOB)
    change(job)
    return job


def _rename(table: dict, old: str, new: str) -> None:
    table[new] = table.pop(old)


# (job file, what the config plants, the file blamed, the key's path, what the fix says)
MISTAKES = {
    "a misspelt metric field": (
        _edit(lambda j: j["experiments"][0]["metric"].update(valuefield="score")),
        "",
        "my-job.json",
        "experiments[0].metric.valuefield",
        "did you mean 'valueField'?",
    ),
    "a misspelt required key": (
        _edit(lambda j: _rename(j["experiments"][0], "conditions", "conditons")),
        "",
        "my-job.json",
        "experiments[0].conditons",
        "did you mean 'conditions'?",
    ),
    "a misspelt prompt": (
        _edit(lambda j: _rename(j["experiments"][1]["conditions"][0], "prompt", "promt")),
        "",
        "my-job.json",
        "experiments[1].conditions[0].promt",
        "did you mean 'prompt'?",
    ),
    "a misspelt protocol key": (
        _edit(lambda j: j["protocol"].update(minimumSamplesPerCondtion=3)),
        "",
        "my-job.json",
        "protocol.minimumSamplesPerCondtion",
        "did you mean 'minimumSamplesPerCondition'?",
    ),
    "a share keyed by an option that is not there": (
        JOB,
        """
        [models.simulate.effects.programs]
        conditions = [{shares = {"Programme B" = 0.3}}, {shares = {"Program B" = 0.7}}]
        """,
        "campaign.toml",
        "models[0].simulate.effects.programs.conditions[0].shares",
        "did you mean 'Program B'?",
    ),
    "more planted conditions than the experiment has": (
        JOB,
        """
        [models.simulate.effects.rating]
        conditions = [{mean = 3}, {mean = 5}, {mean = 6}]
        """,
        "campaign.toml",
        "models[0].simulate.effects.rating.conditions",
        "one entry per condition",
    ),
    "a planted experiment that is not there": (
        JOB,
        """
        [models.simulate.effects.ratings]
        conditions = [{mean = 3}]
        """,
        "campaign.toml",
        "models[0].simulate.effects.ratings",
        "rating",
    ),
}


@pytest.mark.parametrize(
    ("job", "planted", "blamed", "where", "fix"), MISTAKES.values(), ids=list(MISTAKES)
)
def test_a_job_file_mistake_is_exit_2_naming_the_file_the_key_and_a_fix(
    tmp_path, job, planted, blamed, where, fix
):
    path = tmp_path / "my-job.json"
    path.write_text(json.dumps(job))
    cfg = write_config(
        tmp_path,
        f"""
        name = "mine"
        jobs = ["{path}"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        {planted}
        """,
    )
    for verb in ("plan", "run"):
        done = cli(verb, str(cfg), cwd=tmp_path)
        said = " ".join(done.stderr.split())
        assert done.returncode == 2, (verb, done.stdout, done.stderr)
        assert blamed in said and f"field '{where}'" in said and "fix:" in said, said
        assert fix in said and "Traceback" not in said
        assert not (tmp_path / "runs").exists()


def test_the_published_seed_000_file_reads_as_it_is():
    from orchestrator.studies.paired.reader import job_from_seed000

    root = Path(__file__).resolve().parents[1]
    job = job_from_seed000(json.loads((root / "jobs" / "paired.json").read_text()), Path("p"), "p")
    assert len(job.experiments) == 6


def test_an_audit_judge_s_miss_keyed_by_a_bias_that_is_not_there_is_refused(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "audit"
        jobs = ["trace-audit-golden"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "judge"
        temperature = 0
        [models.simulate.audit]
        miss = {{anchoring = 1.0}}
        """,
    )
    done = cli("plan", str(cfg), cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "models[0].simulate.audit.miss" in said, said
    assert "did you mean 'Anchoring'?" in said and not (tmp_path / "runs").exists()


RATE = 'How appealing is it? Return JSON only: {{"value": integer}}. {scale}'


@pytest.mark.parametrize(
    ("contract", "metric", "prompt", "where", "said"),
    [
        (  # two different scales in one prompt: neither is guessed
            None,
            "mean-difference",
            RATE.format(scale="From 3 to 5 people tasted it. Use a 1-10 scale."),
            "experiments[0].conditions[0].prompt",
            "states no scale",
        ),
        (  # a declared rating with a choice metric
            {"type": "rating", "minimum": 1, "maximum": 10},
            "choice-share-difference",
            RATE.format(scale="Use a 1-10 scale."),
            "experiments[0].responseContract.type",
            "the metric type is choice-share-difference",
        ),
        (  # bounds on a number
            {"type": "number", "minimum": 0, "maximum": 100},
            "mean-difference",
            'How much? Return JSON only: {"value": number}.',
            "experiments[0].responseContract",
            "only a rating has",
        ),
        (  # a scale upside down
            {"type": "rating", "minimum": 10, "maximum": 1},
            "mean-difference",
            RATE.format(scale="Use a 1-10 scale."),
            "experiments[0].responseContract",
            "must be below its maximum",
        ),
    ],
)
def test_a_contract_that_cannot_be_right_is_exit_2(tmp_path, contract, metric, prompt, where, said):
    experiment = {
        "experimentSlug": "x",
        "metric": {"type": metric, "direction": "condition0-minus-condition1", "targetOption": "a"},
        "conditions": [{"label": "a", "prompt": prompt}, {"label": "b", "prompt": prompt}],
        **({"responseContract": contract} if contract else {}),
    }
    path = tmp_path / "my-job.json"
    path.write_text(json.dumps({**JOB, "experiments": [experiment]}))
    cfg = write_config(
        tmp_path,
        f"""
        name = "mine"
        jobs = ["{path}"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    done = cli("plan", str(cfg), cwd=tmp_path)
    message = " ".join(done.stderr.split())
    assert done.returncode == 2 and f"field '{where}" in message and said in message, message
    assert "fix:" in message and "Traceback" not in message and not (tmp_path / "runs").exists()


def test_an_experiment_added_beside_an_existing_config_says_what_to_add(tmp_path):
    assert cli("init", str(tmp_path), cwd=tmp_path).returncode == 0
    before = (tmp_path / "campaign.toml").read_text()
    done = cli("init", str(tmp_path), "--experiment", "free-text", cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 0 and (tmp_path / "free-text-experiment.json").is_file()
    assert (tmp_path / "campaign.toml").read_text() == before
    assert 'add "free-text-experiment.json" to its jobs and an [extractor]' in said


def _judge_job(change) -> dict:
    root = Path(__file__).resolve().parents[1]
    job = json.loads((root / "jobs" / "judge-history.json").read_text())
    change(job)
    return job


@pytest.mark.parametrize(
    ("change", "where", "fix"),
    [
        (
            lambda j: j["analysisPlan"].update(scorerange=[1, 10]),
            "analysisPlan.scorerange",
            "'scoreRange'",
        ),
        (
            lambda j: _rename(j, "promptTemplates", "promptTemplate"),
            "promptTemplate",
            "'promptTemplates'",
        ),
        (lambda j: j["tasks"][0].update(goldscore=4), "tasks[0].goldscore", "'goldScore'"),
    ],
)
def test_a_judge_history_job_s_typo_is_refused(tmp_path, change, where, fix):
    path = tmp_path / "my-judge.json"
    path.write_text(json.dumps(_judge_job(change)))
    cfg = write_config(
        tmp_path,
        f"""
        name = "judge"
        jobs = ["{path}"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    done = cli("plan", str(cfg), cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and f"field '{where}'" in said and f"did you mean {fix}" in said
    assert "my-judge.json" in said and not (tmp_path / "runs").exists()


def test_a_judge_scale_the_wording_contradicts_is_a_warning(tmp_path):
    def ten(job):
        job["outputContract"]["score"] = "an integer from 1 to 10"

    path = tmp_path / "my-judge.json"
    path.write_text(json.dumps(_judge_job(ten)))
    cfg = write_config(
        tmp_path,
        f"""
        name = "judge"
        jobs = ["{path}"]
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    done = cli("plan", str(cfg), cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 0 and "states a 1-10 scale, the answer contract 1-5" in said, said

"""Behaviours a user relies on in the Instructed to Bias study: task few-shot refused where a
belief dataset has none, the text plan's total in calls, and reduced runs that keep positions
balanced (found in review; each failed before its fix)."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import orjson
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from tests.conftest import ROOT, write_config

RAW = json.loads((ROOT / "jobs" / "instructed.json").read_text())


def _config(
    tmp_path: Path, settings: str, job: str = "instructed", answers: str = "generate"
) -> Path:
    return write_config(
        tmp_path,
        f"""
        name = "rv"
        jobs = ["{job}"]
        output_dir = "{tmp_path / "runs"}"
        {settings}
        [[models]]
        provider = "simulated"
        name = "m"
        temperature = 0
        answers = "{answers}"
        """,
    )


def test_task_shots_asked_of_a_belief_dataset_without_few_shot_words_are_refused(tmp_path):
    """shot_kind = "task" on a belief dataset that has no few_shot_words (so no task examples)
    silently puts the *format* examples (arithmetic) before every syllogism instead."""
    raw = copy.deepcopy(RAW)
    raw["belief"][0]["few_shot_words"] = []
    (tmp_path / "job.json").write_bytes(orjson.dumps(raw))
    config = _config(tmp_path, 'shots = 2\nshot_kind = "task"', job=str(tmp_path / "job.json"))
    result = CliRunner().invoke(app, ["plan", str(config)])
    assert result.exit_code == 2, result.output  # today: 0, and the plan uses format shots


def test_the_plan_total_counts_scoring_calls_not_tasks(tmp_path):
    """The text plan's last line says "N calls" but prints the number of tasks: a scored model
    makes one call per option, as its own table row and `plan --json` say."""
    config = _config(tmp_path, "", answers="score")
    plan_json = orjson.loads(CliRunner().invoke(app, ["plan", str(config), "--json"]).output)
    calls, tasks = plan_json["total"]["calls"], plan_json["total"]["tasks"]
    assert calls > tasks
    text = " ".join(CliRunner().invoke(app, ["plan", str(config)]).output.split())
    assert f"total: {calls:,} calls" in text, text[-300:]


def test_a_reduced_run_keeps_every_option_order_of_the_items_it_samples(tmp_path):
    """`items = N` samples items one by one, so the option orders stop being balanced: with the
    shipped instructed-local seed, a respondent that always answers "Option A" gets a
    Certainty score of 17/30 - 9/30 = +0.27 (p = 0.04), purely from where the sure option
    happened to be shown. Keeping whole groups of orders (template x values) keeps each role
    in each position equally often, as in the full design."""
    config = _config(tmp_path, "items = 30\nseed = 20261201")
    first_role = Counter()
    for cell in Plan(load_campaign(config)).cells:
        roles = cell.contract.roles
        first_role[(cell.experiment.slug, cell.condition.index, roles[0])] += 1
    for (slug, cond, role), n in first_role.items():
        others = [m for (s, c, r), m in first_role.items() if (s, c) == (slug, cond)]
        assert max(others) - min(others) <= 1, (slug, cond, dict(first_role))

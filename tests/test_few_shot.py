"""Few-shot prompts (seed 004, section 6.1): zero-shot by default; `shots` format examples (neutral
choices) or task examples (belief bias in words no test item uses) before each question."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.plan import Plan
from orchestrator.plan_prompts import ANSWER_CUE
from orchestrator.session import load_campaign
from tests.conftest import write_config


def plan(tmp_path, settings: str = "", answers: str = "generate") -> Plan:
    config = write_config(
        tmp_path,
        f"""
        name = "fs"
        jobs = ["instructed"]
        output_dir = "{tmp_path / "runs"}"
        {settings}
        [[models]]
        provider = "simulated"
        name = "m"
        answers = "{answers}"
        """,
    )
    return Plan(load_campaign(config))


def user_text(cell) -> str:
    return cell.messages[-1]["content"]


def test_zero_shot_by_default_with_no_example_before_the_question(tmp_path):
    for cell in plan(tmp_path).cells:
        assert user_text(cell).startswith(cell.variant.prompt)
        assert ANSWER_CUE not in user_text(cell)


@pytest.mark.parametrize("answers", ["generate", "score"])
def test_format_shots_come_from_the_experiments_pool_and_stay_with_their_item(tmp_path, answers):
    cells = plan(tmp_path, "shots = 3", answers).cells
    again = {c.key: user_text(c) for c in plan(tmp_path, "shots = 3", answers).cells}
    drawn = set()
    for cell in cells:
        text = user_text(cell)
        head, _, rest = text.partition(cell.variant.prompt)
        shown = re.findall(rf"(.+)\n{ANSWER_CUE} (.+)\n\n", head)
        pool = {(s.prompt, s.answer) for s in cell.experiment.format_shots}
        assert len(shown) == 3 and len(set(shown)) == 3 and set(shown) <= pool, cell.variant.id
        drawn.add(tuple(shown))
        assert again[cell.key] == text  # the same examples every time the plan is built
    assert len(drawn) > 20  # items draw different examples
    zero = {c.key for c in plan(tmp_path, answers=answers).cells}
    assert zero.isdisjoint(c.key for c in cells)  # another prompt: other task ids


def test_task_shots_are_belief_syllogisms_in_the_few_shot_words_with_correct_answers(tmp_path):
    cells = plan(tmp_path, 'shots = 4\nshot_kind = "task"').cells
    belief = next(c for c in cells if c.experiment.slug == "belief")
    assert len(belief.experiment.task_shots) >= 4
    for shot in belief.experiment.task_shots:
        assert shot.answer == ("valid" if "Conclusion: All" in shot.prompt else "invalid")
    few = {"thuluffs", "pluroffs", "glivuts", "vemacks", "glufits", "bruvims", "kadoms", "glisits"}
    for cell in cells:
        head = user_text(cell).partition(cell.variant.prompt)[0]
        if cell.experiment.slug == "belief":
            used = set(re.findall(r"All (\w+) are", head))
            assert used and used <= few
            assert not few & set(re.findall(r"\w+", cell.variant.prompt))
        else:  # the other datasets have no task examples: format ones
            assert head.count(ANSWER_CUE) == 4 and not few & set(re.findall(r"\w+", head))


@pytest.mark.parametrize(
    "settings, jobs, says",
    [
        ("shots = 6", '"instructed"', "has only 5"),
        ("shots = 2", '"paired"', "no job of the campaign has few-shot examples"),
    ],
)
def test_shots_no_job_can_give_are_refused_before_anything_is_written(
    tmp_path, settings, jobs, says
):
    config = write_config(
        tmp_path,
        f"""
        name = "bad"
        jobs = [{jobs}]
        output_dir = "{tmp_path / "runs"}"
        {settings}
        [[models]]
        provider = "simulated"
        name = "m"
        """,
    )
    result = CliRunner().invoke(app, ["run", str(config)])
    assert result.exit_code == 2, result.output
    assert says in result.output and "shots" in result.output and "fix:" in result.output
    assert not (tmp_path / "runs").exists()

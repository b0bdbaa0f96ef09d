"""`orchestrator plan --json`: only JSON on stdout, with counts that match the job files."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.conftest import ROOT, write_config

# Model "b" is at temperature 0, so it gets a job's deterministic minimum where there is one.
CONFIG = """
name = "pj"
jobs = ["{job}"]
[[models]]
provider = "simulated"
name = "a"
temperature = 1.0
[[models]]
provider = "simulated"
name = "b"
temperature = 0
"""


def _expected(job: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(experiment, condition) -> (items, tasks), counted from the job file alone."""
    spec = json.loads((ROOT / "jobs" / f"{job}.json").read_text(encoding="utf-8"))
    if job == "paired":  # one prompt per condition, no strategies
        p = spec["protocol"]
        samples = p["minimumSamplesPerCondition"] + p["deterministicMinimumSamplesPerCondition"]
        return {
            (e["experimentSlug"], i): (1, samples)
            for e in spec["experiments"]
            for i in range(len(e["conditions"]))
        }
    if job == "bias-strength":  # control and treatment per variant, four strategies (D0-D3)
        return {
            (b["slug"], i): (len(b["variants"]), len(b["variants"]) * 4 * spec["samples"] * 2)
            for b in spec["biases"]
            for i in range(2)
        }
    reps = spec["design"]["recommendedRepetitionsPerCondition"]  # judge history: one prompt each
    return {
        (t["id"], i): (1, reps * 2)
        for t in spec["tasks"]
        for i in range(len(spec["design"]["conditions"]))
    }


@pytest.mark.parametrize("job", ["paired", "bias-strength", "judge-history"])
def test_the_json_counts_are_those_of_the_job_file_and_the_text_plan(tmp_path, job):
    config = write_config(tmp_path, CONFIG.format(job=job))
    result = CliRunner().invoke(app, ["plan", str(config), "--json"])
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)  # nothing but the JSON on stdout
    [entry] = plan["jobs"]
    got = {
        (e["slug"], c["index"]): (c["items"], c["tasks"])
        for e in entry["experiments"]
        for c in e["conditions"]
    }
    assert got == _expected(job)
    assert all(e["tasks"] == sum(c["tasks"] for c in e["conditions"]) for e in entry["experiments"])
    text = CliRunner().invoke(app, ["plan", str(config)]).stdout
    total = int(re.search(r"total: ([\d,]+) calls", text)[1].replace(",", ""))
    assert plan["total"]["tasks"] == plan["total"]["calls"] == entry["tasks"] == total
    assert total == sum(tasks for _, tasks in got.values())
    assert [m["label"] for m in plan["models"]] == ["simulated/a", "simulated/b"]
    assert sum(m["tasks"] for m in plan["models"]) == total
    assert all(
        m["calls"] == m["tasks"] and m["free"] and m["input_tokens"] > 0 for m in plan["models"]
    )
    assert plan["seed"] is not None and re.fullmatch(r"[0-9a-f]{32}", plan["plan_hash"])
    assert plan["warnings"] == [] and plan["total"]["cost_usd"] == 0


def test_a_model_without_a_price_is_a_warning_in_the_json(tmp_path):
    config = write_config(
        tmp_path,
        """
        name = "w"
        jobs = ["paired"]
        samples = 2
        [[models]]
        provider = "openai"
        name = "an-unpriced-model"
        base_url = "http://127.0.0.1:9/v1"
        [limits.openai]
        rpm = 60
        """,
    )
    result = CliRunner().invoke(app, ["plan", str(config), "--json"])
    plan = json.loads(result.stdout)
    assert plan["models"][0]["cost_usd"] == {"typical": None, "max": None}
    assert plan["duration_s"] == {"openai": 24 / 60 * 60}  # 24 calls at 60 a minute
    assert len(plan["warnings"]) == 1 and "an-unpriced-model has no price" in plan["warnings"][0]


def test_a_bad_config_exits_2_with_nothing_on_stdout(tmp_path):
    config = write_config(tmp_path, CONFIG.format(job="no-such-job"))
    result = CliRunner().invoke(app, ["plan", str(config), "--json"])
    assert result.exit_code == 2
    assert result.stdout == "" and "no-such-job" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["campaign.toml"]


def _plan_json(tmp_path, extra: str) -> dict:
    config = write_config(
        tmp_path,
        f"""
        name = "items"
        jobs = ["instructed"]
        {extra}
        [[models]]
        provider = "simulated"
        name = "a"
        """,
    )
    result = CliRunner().invoke(app, ["plan", str(config), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _items_by_condition(plan: dict) -> dict[tuple[str, str], int]:
    (job,) = plan["jobs"]
    return {
        (e["slug"], c["label"]): c["items"] for e in job["experiments"] for c in e["conditions"]
    }


@pytest.mark.slow
def test_items_takes_a_seeded_sample_of_each_condition_that_keeps_its_items(tmp_path):
    from orchestrator.plan import Plan
    from orchestrator.session import load_campaign

    full = _items_by_condition(_plan_json(tmp_path, ""))
    some = _items_by_condition(_plan_json(tmp_path, "items = 30"))
    assert some == {k: min(30, n) for k, n in full.items()}
    assert min(full.values()) > 30  # every condition was cut

    def chosen(items: int, seed: int = 0) -> set[str]:
        config = write_config(
            tmp_path,
            f"""
            name = "items"
            jobs = ["instructed"]
            items = {items}
            seed = {seed}
            [[models]]
            provider = "simulated"
            name = "a"
            """,
            name=f"c{items}-{seed}.toml",
        )
        return {c.variant.id for c in Plan(load_campaign(config)).cells}

    assert chosen(30) < chosen(60)  # a larger sample keeps the smaller one's items
    assert chosen(30) != chosen(30, seed=1)

"""--limit caps every job kind (issue 43, item 5): a seed-000 job has one item per condition, so
its limit takes that many experiments, chosen by the seed, and `plan` says how. On 0.2.0 the
demo planned 480 calls with or without it."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cli, write_config


@pytest.fixture
def config(tmp_path):
    return write_config(
        tmp_path,
        f"""
        name = "c"
        jobs = ["paired"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        """,
    )


def _planned(config, *flags) -> dict:
    done = cli("plan", str(config), "--json", *flags, cwd=config.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["jobs"][0]


def test_limit_takes_that_many_experiments_of_a_one_item_job_and_plan_says_so(config):
    whole = _planned(config)
    assert len(whole["experiments"]) == 6 and "limit" not in whole
    two, four = _planned(config, "--limit", "2"), _planned(config, "--limit", "4")
    assert len(two["experiments"]) == 2 and len(four["experiments"]) == 4
    assert two["tasks"] == whole["tasks"] * 2 // 6
    assert {e["slug"] for e in two["experiments"]} <= {e["slug"] for e in four["experiments"]}
    assert "takes 2 of its 6 experiments" in two["limit"]
    said = " ".join(cli("plan", str(config), "--limit", "2", cwd=config.parent).stdout.split())
    assert "limit: job paired: one item per condition, so the limit of 2 takes 2 of its 6" in said

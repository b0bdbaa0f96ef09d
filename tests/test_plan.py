"""The planner: counts, stable ids, laziness, interleaved seeded order, variants and strategies."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from itertools import islice

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.plan import Plan
from orchestrator.plan_changes import describe_changes
from orchestrator.session import load_campaign
from orchestrator.shuffle import Shuffle
from orchestrator.spec.campaign import CampaignConfig
from orchestrator.spec.models import (
    Condition,
    Experiment,
    Job,
    Metric,
    ResponseContract,
    Strategy,
    Variant,
)
from tests.conftest import ROOT, write_config

CONFIG = """
name = "p"
jobs = ["paired"]
samples = 7
seed = 11
[[models]]
provider = "simulated"
name = "a"
[[models]]
provider = "simulated"
name = "b"
temperature = 1.0
"""


def _plan(tmp_path, body=CONFIG):
    return Plan(load_campaign(write_config(tmp_path, body)))


def test_every_task_once_with_the_right_counts(tmp_path):
    plan = _plan(tmp_path)
    tasks = list(plan.tasks())
    assert plan.total == len(tasks) == 2 * 6 * 2 * 7
    assert len({t.task_id for t in tasks}) == len(tasks)
    per_cell = Counter(
        (t.cell.model.name, t.cell.experiment.slug, t.cell.condition.index) for t in tasks
    )
    assert set(per_cell.values()) == {7}
    assert sorted({t.sample for t in tasks}) == list(range(1, 8))


def test_ids_are_stable_across_processes(tmp_path):
    cfg = write_config(tmp_path, CONFIG)
    here = [t.task_id for t in islice(Plan(load_campaign(cfg)).tasks(), 20)]
    code = (
        f"from pathlib import Path; from orchestrator.plan import Plan; "
        f"from orchestrator.session import load_campaign; from itertools import islice; "
        f"print(' '.join(t.task_id for t in islice(Plan(load_campaign(Path({str(cfg)!r}))).tasks(), 20)))"
    )
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert there.stdout.split() == here


def test_ids_change_with_anything_that_defines_the_call(tmp_path):
    base = {t.task_id for t in _plan(tmp_path).tasks()}
    warmer = {
        t.task_id
        for t in _plan(tmp_path, CONFIG.replace("temperature = 1.0", "temperature = 0.5")).tasks()
    }
    assert len(base & warmer) == 2 * 6 * 2 * 7 // 2  # model "a" unchanged, model "b" all new
    reseeded = {
        t.task_id for t in _plan(tmp_path, CONFIG.replace("seed = 11", "seed = 12")).tasks()
    }
    assert reseeded == base  # the seed changes the order only


def test_order_is_seeded_and_interleaves_conditions(tmp_path):
    first = [t.task_id for t in _plan(tmp_path).tasks()]
    assert first == [t.task_id for t in _plan(tmp_path).tasks()]
    assert first != [
        t.task_id for t in _plan(tmp_path, CONFIG.replace("seed = 11", "seed = 12")).tasks()
    ]
    head = list(islice(_plan(tmp_path).tasks(), 40))
    assert len({(t.cell.experiment.slug, t.cell.condition.index) for t in head}) >= 8
    assert len({t.cell.model.name for t in head}) == 2


def test_skip_and_model_subsets(tmp_path):
    plan = _plan(tmp_path)
    all_ids = [t.task_id for t in plan.tasks()]
    skip = set(all_ids[::3])
    rest = [t.task_id for t in plan.tasks(skip=skip)]
    assert set(rest) == set(all_ids) - skip
    only_b = list(plan.tasks(model_indices=[1]))
    assert {t.cell.model.name for t in only_b} == {"b"} and len(only_b) == plan.total // 2


def test_expansion_is_lazy(tmp_path):
    plan = _plan(tmp_path, CONFIG.replace("samples = 7", "samples = 1000000"))
    assert plan.total == 24_000_000
    first = list(islice(plan.tasks(model_indices=[0]), 3))  # must not build 12M tasks first
    assert len(first) == 3


def test_variants_and_strategies_are_crossed():
    contract = ResponseContract(kind="number")
    conditions = tuple(
        Condition(
            index=i,
            label=f"c{i}",
            variants=tuple(
                Variant(id=f"v{k}", prompt=f"prompt {i}/{k}", contract=contract) for k in range(3)
            ),
        )
        for i in range(2)
    )
    job = Job(
        id="j",
        system_prompt="sys",
        min_samples=2,
        kind="paired",
        experiments=(
            Experiment(
                slug="e",
                metric=Metric(type="mean-difference", direction="condition0-minus-condition1"),
                conditions=conditions,
            ),
        ),
        strategies=(
            Strategy(id="baseline"),
            Strategy(id="cot", user_suffix="Let's think step by step."),
            Strategy(id="analyst", system_prompt="You are a rational analyst."),
        ),
    )
    config = CampaignConfig(name="x", jobs=["j"], models=[{"provider": "simulated", "name": "m"}])
    from orchestrator.spec.campaign import Campaign

    plan = Plan(Campaign(config, [job], None))
    tasks = list(plan.tasks())
    assert len(tasks) == 2 * 3 * 3 * 2
    cot = [t for t in tasks if t.cell.strategy.id == "cot"]
    assert all(t.cell.messages[1]["content"].endswith("Let's think step by step.") for t in cot)
    analyst = [t for t in tasks if t.cell.strategy.id == "analyst"]
    assert all(t.cell.messages[0]["content"] == "You are a rational analyst." for t in analyst)
    assert Counter((t.cell.variant.id, t.cell.strategy.id) for t in tasks) == {
        (f"v{k}", s): 4 for k in range(3) for s in ("baseline", "cot", "analyst")
    }


def test_fingerprint_differences_are_named(tmp_path):
    old = _plan(tmp_path).fingerprint()
    new = _plan(tmp_path, CONFIG.replace("samples = 7", "samples = 8")).fingerprint()
    assert describe_changes(old, new) == [
        "samples of paired: 7 -> 8",
        "tasks: 168 -> 192",
    ]
    assert describe_changes(old, _plan(tmp_path).fingerprint()) == []


def test_ids_are_those_of_earlier_versions(tmp_path):
    """The order is computed differently since 0.1 (a Feistel permutation, not a shuffled
    array); the ids must not change with it, or resuming an older run would pay for it again."""
    old_name = CONFIG.replace('jobs = ["paired"]', 'jobs = ["ai-bias-benchmark"]')
    ids = sorted(t.task_id for t in _plan(tmp_path, old_name).tasks())
    assert hashlib.blake2b("".join(ids).encode(), digest_size=8).hexdigest() == "8c2be3937e1fca32"


def test_a_renamed_built_in_job_keeps_its_former_ids_under_its_former_name(tmp_path):
    """jobs/ai-bias-benchmark.json is jobs/paired.json since 0.2.0: a config (or a run's
    manifest) naming it the old way plans the same job under the old id, so its runs resume and
    compare as before; the new name is a new job id."""
    old = _plan(tmp_path, CONFIG.replace('jobs = ["paired"]', 'jobs = ["ai-bias-benchmark"]'))
    new = _plan(tmp_path)
    assert [j.id for j in old.campaign.jobs] == ["ai-bias-benchmark"]
    assert [j.id for j in new.campaign.jobs] == ["paired"]
    assert old.campaign.jobs[0].experiments == new.campaign.jobs[0].experiments
    assert {t.task_id for t in old.tasks()}.isdisjoint(t.task_id for t in new.tasks())


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 17, 255, 256, 257, 1000, 65_537])
def test_the_shuffle_is_a_permutation_at_any_size(n):
    image = Shuffle(n, b"seed")(np.arange(n, dtype=np.uint64))
    assert sorted(image.tolist()) == list(range(n))
    if n >= 5:
        assert image.tolist() != list(range(n))
        assert image.tolist() != Shuffle(n, b"other seed")(np.arange(n, dtype=np.uint64)).tolist()


def test_the_shuffle_of_a_chunk_is_the_shuffle_of_its_indices():
    whole = Shuffle(100_000, b"s")(np.arange(100_000, dtype=np.uint64))
    part = Shuffle(100_000, b"s")(np.arange(40_000, 40_100, dtype=np.uint64))
    assert part.tolist() == whole[40_000:40_100].tolist()


def test_a_billion_samples_are_planned_lazily(tmp_path):
    # 12 cells x 1e9 samples: a shuffled index array would need 89 GiB before the first task
    plan = _plan(tmp_path, CONFIG.replace("samples = 7", "samples = 1000000000"))
    assert plan.total == 24_000_000_000
    head = list(islice(plan.tasks(), 200))
    assert len({t.task_id for t in head}) == 200
    assert (
        len({(t.cell.model.name, t.cell.experiment.slug, t.cell.condition.index) for t in head})
        >= 12
    )
    assert max(t.sample for t in head) > 1_000_000  # drawn from the whole range, not its start


def test_samples_beyond_what_ids_can_number_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(
        tmp_path,
        CONFIG.replace("samples = 7", "samples = 5000000000").replace(
            "seed = 11", f'seed = 11\noutput_dir = "{tmp_path / "runs"}"'
        ),
    )
    for command in ("plan", "run"):
        result = CliRunner().invoke(app, [command, str(cfg)])
        flat = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert "field 'samples'" in flat and "4,294,967,295" in flat and "fix:" in flat
        assert "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()
    assert (
        _plan(tmp_path, CONFIG.replace("samples = 7", "samples = 4294967295")).total
        == 24 * 4294967295
    )


def _job_file(tmp_path, mutate) -> str:
    """A copy of the seed-000 job under its own id, changed by `mutate`."""
    spec = json.loads((ROOT / "jobs" / "paired.json").read_text(encoding="utf-8"))
    mutate(spec)
    path = tmp_path / "jobs" / "paired.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def test_a_changed_plan_is_named_one_line_per_item(tmp_path):
    old = _plan(tmp_path).fingerprint()

    def changes(body: str) -> list[str]:
        return describe_changes(old, _plan(tmp_path, body).fingerprint())

    assert changes(CONFIG.replace("temperature = 1.0", "temperature = 0.3")) == [
        "model simulated/b: temperature 1.0 -> 0.3"
    ]
    assert changes(CONFIG.replace("seed = 11", "seed = 12")) == ["seed: 11 -> 12"]
    assert changes(CONFIG + "max_tokens = 64\nseed = 5\n") == [
        "model simulated/b: max_tokens 256 -> 64",
        "model simulated/b: seed unset -> 5",
    ]
    assert changes(CONFIG + '[[models]]\nprovider = "simulated"\nname = "c"\n') == [
        "model simulated/c added",
        "tasks: 168 -> 252",
    ]
    assert changes(CONFIG.replace('name = "a"', 'name = "z"')) == [
        "model simulated/a removed",
        "model simulated/z added",
    ]

    def prompt_changed(spec):
        spec["experiments"][0]["conditions"][1]["prompt"] += " Answer quickly."

    job = _job_file(tmp_path, prompt_changed)
    assert changes(CONFIG.replace('jobs = ["paired"]', f'jobs = ["{job}"]')) == [
        "prompt of anchoring-first-number:1"
    ]
    job = _job_file(tmp_path, lambda spec: spec["protocol"].update(systemPrompt="Be brief."))
    assert changes(CONFIG.replace('jobs = ["paired"]', f'jobs = ["{job}"]')) == [
        "the system prompt"
    ]


def test_the_fingerprint_does_not_grow_with_samples(tmp_path):
    small = _plan(tmp_path).fingerprint()
    big = _plan(tmp_path, CONFIG.replace("samples = 7", "samples = 1000000")).fingerprint()
    assert len(orjson.dumps(big)) - len(orjson.dumps(small)) < 40  # a few wider numbers
    assert small["prompts"]["paired"].keys() == {
        "system",
        "strategy:baseline",
        *(
            f"{e}:{i}"
            for e in (
                "anchoring-first-number",
                "framing-survival-mortality",
                "decoy-subscription-choice",
                "escalation-past-investment",
                "outcome-bias-supplier-decision",
                "planning-fallacy-reference-class",
            )
            for i in (0, 1)
        ),
    }


def test_a_run_made_before_prompt_digests_still_resumes(tmp_path):
    before = {k: v for k, v in _plan(tmp_path).fingerprint().items() if k != "prompts"}
    assert describe_changes(before, _plan(tmp_path).fingerprint()) == []
    job = _job_file(
        tmp_path,
        lambda spec: spec["experiments"][0]["conditions"][0].update(
            prompt=spec["experiments"][0]["conditions"][0]["prompt"] + " Be quick."
        ),
    )
    changed = _plan(tmp_path, CONFIG.replace('jobs = ["paired"]', f'jobs = ["{job}"]'))
    assert describe_changes(before, changed.fingerprint()) == [
        "prompts or response contracts of the jobs changed"
    ]

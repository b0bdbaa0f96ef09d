"""The planner: counts, stable ids, laziness, interleaved seeded order, variants and strategies."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from itertools import islice

from orchestrator.plan import Plan, describe_changes
from orchestrator.spec.campaign import CampaignConfig, load_campaign
from orchestrator.spec.models import (Condition, Experiment, Job, Metric, ResponseContract,
                                      Strategy, Variant)
from tests.conftest import write_config

CONFIG = """
name = "p"
jobs = ["ai-bias-benchmark"]
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
    per_cell = Counter((t.cell.model.name, t.cell.experiment.slug, t.cell.condition.index) for t in tasks)
    assert set(per_cell.values()) == {7}
    assert sorted({t.sample for t in tasks}) == list(range(1, 8))


def test_ids_are_stable_across_processes(tmp_path):
    cfg = write_config(tmp_path, CONFIG)
    here = [t.task_id for t in islice(Plan(load_campaign(cfg)).tasks(), 20)]
    code = (f"from pathlib import Path; from orchestrator.plan import Plan; "
            f"from orchestrator.spec.campaign import load_campaign; from itertools import islice; "
            f"print(' '.join(t.task_id for t in islice(Plan(load_campaign(Path({str(cfg)!r}))).tasks(), 20)))")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert there.stdout.split() == here


def test_ids_change_with_anything_that_defines_the_call(tmp_path):
    base = {t.task_id for t in _plan(tmp_path).tasks()}
    warmer = {t.task_id for t in _plan(tmp_path, CONFIG.replace("temperature = 1.0", "temperature = 0.5")).tasks()}
    assert len(base & warmer) == 2 * 6 * 2 * 7 // 2  # model "a" unchanged, model "b" all new
    reseeded = {t.task_id for t in _plan(tmp_path, CONFIG.replace("seed = 11", "seed = 12")).tasks()}
    assert reseeded == base  # the seed changes the order only


def test_order_is_seeded_and_interleaves_conditions(tmp_path):
    first = [t.task_id for t in _plan(tmp_path).tasks()]
    assert first == [t.task_id for t in _plan(tmp_path).tasks()]
    assert first != [t.task_id for t in _plan(tmp_path, CONFIG.replace("seed = 11", "seed = 12")).tasks()]
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
    conditions = tuple(Condition(index=i, label=f"c{i}", variants=tuple(
        Variant(id=f"v{k}", prompt=f"prompt {i}/{k}", contract=contract) for k in range(3)))
        for i in range(2))
    job = Job(id="j", system_prompt="sys", min_samples=2,
              experiments=(Experiment(slug="e", metric=Metric(type="mean-difference",
                                      direction="condition0-minus-condition1"), conditions=conditions),),
              strategies=(Strategy(id="baseline"), Strategy(id="cot", user_suffix="Let's think step by step."),
                          Strategy(id="analyst", system_prompt="You are a rational analyst.")))
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
        (f"v{k}", s): 4 for k in range(3) for s in ("baseline", "cot", "analyst")}


def test_fingerprint_differences_are_named(tmp_path):
    old = _plan(tmp_path).fingerprint()
    new = _plan(tmp_path, CONFIG.replace("samples = 7", "samples = 8")).fingerprint()
    changes = describe_changes(old, new)
    assert any(c.startswith("samples:") for c in changes) and any(c.startswith("tasks:") for c in changes)
    assert describe_changes(old, _plan(tmp_path).fingerprint()) == []

"""Seed 003 on a reasoning model's own thinking: the simulated reasoner's traces, joined to the
11-bias study's conditions, audited by a judge that reads them. The anchoring the traces show
by condition is planted (15% of control traces, 60% of anchored ones take the question's figure
as their starting point), and the judge finds it from the text alone."""

from __future__ import annotations

import shutil

import polars as pl
import pytest

from tests.conftest import ROOT, cli


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    root = tmp_path_factory.mktemp("native")
    shutil.copytree(ROOT / "configs", root / "configs")
    for config in ("reasoning-simulated", "reasoning-simulated-audit"):
        done = cli("run", f"configs/{config}.toml", cwd=root)
        assert done.returncode == 0, done.stdout + done.stderr
    return root


def test_the_audit_finds_the_planted_anchoring_by_condition(rehearsal):
    done = cli("analyze", "runs/reasoning-simulated-audit/default", cwd=rehearsal)
    assert done.returncode == 0, done.stderr
    table = pl.read_csv(rehearsal / "runs/reasoning-simulated-audit/default/audit_conditions.csv")
    anchoring = table.filter(pl.col("experiment") == "anchoring")
    row = anchoring.filter(pl.col("bias") == "Anchoring").row(0, named=True)
    # planted: 4 - 2 x 0.15 = 3.7 in control, 4 - 2 x 0.6 = 2.8 anchored, so -0.9. The test is
    # over the 5 items (a paired t, df 4), not the 100 traces: it gives up the power that
    # taking the traces for independent draws claimed (p < 1e-3 then), which holds only where
    # items do not differ, as here but not in general (issue 45)
    assert (row["items"], row["traces"], row["method"]) == (5, 100, "paired t")
    assert row["ci_low"] < -0.9 < row["ci_high"] and row["ci_high"] < 0 and row["p"] < 0.05
    others = anchoring.filter(pl.col("bias") != "Anchoring")["difference"].to_list()
    assert others == [0.0, 0.0, 0.0]  # nothing planted there, nothing found
    elsewhere = table.filter(
        (pl.col("experiment") != "anchoring") & (pl.col("bias") == "Anchoring")
    )
    assert set(elsewhere["difference"].to_list()) == {0.0}  # no anchoring planted elsewhere


def test_asking_for_answers_where_the_run_has_no_cot_names_the_fix(rehearsal):
    done = cli(
        "audit",
        "runs/reasoning-simulated/default",
        "--judge",
        "simulated",
        "--traces",
        "answer",
        cwd=rehearsal,
    )
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    assert "no task under the strategies cot" in said and "reasoning model" in said


def test_asking_for_reasoning_where_no_model_showed_any_names_the_fix(tmp_path):
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    assert cli("run", "configs/simulated.toml", cwd=tmp_path).returncode == 0
    done = cli(
        "audit",
        "runs/simulated/default",
        "--judge",
        "simulated",
        "--traces",
        "reasoning",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    assert "no reasoning of a model's own" in said and "--traces answer" in said
    assert not (tmp_path / "runs" / "audit-simulated-default").exists()

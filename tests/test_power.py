"""`orchestrator power` and `plan --json`'s power: minimum detectable effects before paying.
The figures are checked by simulation in tests/test_power_<study>.py; here, the command: what
it prints, its JSON, a pilot's variances, the targets and the refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from orchestrator.analysis.power import Precision, mde, samples_for
from tests.conftest import cli, write_config

ROOT = Path(__file__).resolve().parents[1]


def _rows(out: str) -> dict[str, dict]:
    return {r["experiment"]: r for r in json.loads(out)["tests"]}


def test_the_mde_of_a_welch_test_matches_the_textbook_formula():
    """MDE = (t(.975, df) + t(.8, df)) * sd * sqrt(2/n); scipy's noncentral t gives the power
    there as 0.80 (the approximation's error at 20 a side is under a point)."""
    design = lambda n, d: Precision(math.sqrt(2 / n), math.sqrt(2 / n), df=2 * n - 2)  # noqa: E731
    found = mde(design, 20, 0.05, 0.8)
    t = stats.t(38)
    assert found == pytest.approx((t.ppf(0.975) + t.ppf(0.8)) * math.sqrt(2 / 20))
    crit = t.ppf(0.975)
    nc = found / math.sqrt(2 / 20)
    power = stats.nct(38, nc).sf(crit) + stats.nct(38, nc).cdf(-crit)
    assert abs(power - 0.8) < 0.01, power
    # the samples a target needs: the fewest whose MDE reaches it
    needed = samples_for(design, 0.5, 0.05, 0.8)
    assert mde(design, needed, 0.05, 0.8) <= 0.5 < mde(design, needed - 1, 0.05, 0.8)


def test_power_on_the_demo_states_its_defaults_and_the_shipped_figures(tmp_path):
    done = cli("power", str(ROOT / "configs/demo.toml"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    assert len(rows) == 6  # the six seed-000 experiments on the one local model
    anchoring = rows["anchoring-first-number"]
    # 20 answers a condition, an answer SD of 1 (no scale: effects in answer SDs)
    assert anchoring["mde"] == pytest.approx(0.909, abs=0.001)
    assert anchoring["scale"] == "answer SDs" and "default" in anchoring["variance"]
    framing = rows["framing-survival-mortality"]  # a 1-7 rating: SD a quarter of the scale
    assert framing["mde"] == pytest.approx(1.5 * 0.909, abs=0.002)
    decoy = rows["decoy-subscription-choice"]
    assert decoy["scale"] == "share" and decoy["mde"] == pytest.approx(0.43, abs=0.01)
    assert all(r["more_samples_help"] and r["alpha"] == 0.05 for r in rows.values())
    shown = cli("power", str(ROOT / "configs/demo.toml"), cwd=tmp_path)
    assert "minimum detectable effects at 80% power" in shown.stdout
    assert "shares either side of 0.5" in shown.stdout
    assert not any(tmp_path.iterdir())  # plans only: nothing written


def test_a_target_effect_gives_samples_calls_and_cost(tmp_path):
    done = cli("power", str(ROOT / "configs/demo.toml"), "--mde", "0.2", "--json", cwd=tmp_path)
    rows = _rows(done.stdout)
    decoy = rows["decoy-subscription-choice"]
    # two shares either side of 0.5, 0.2 apart: about 97 answers a condition
    assert decoy["samples_needed"] == 97 and decoy["calls_needed"] == 2 * 97
    assert decoy["cost_usd_needed"] == 0.0  # the local model is free
    stricter = _rows(
        cli(
            "power",
            str(ROOT / "configs/demo.toml"),
            "--mde",
            "0.2",
            "--power",
            "0.9",
            "--json",
            cwd=tmp_path,
        ).stdout
    )
    assert stricter["decoy-subscription-choice"]["samples_needed"] > 97


def test_a_deterministic_model_gets_no_test_and_says_more_samples_cannot_help(tmp_path):
    config = write_config(
        tmp_path,
        'name = "t0"\njobs = ["paired"]\nsamples = 5\n[[models]]\nprovider = "simulated"\n'
        'name = "sim"\ntemperature = 0\n',
    )
    done = cli("power", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "T=0: repeated answers are one draw" in done.stdout
    assert "more samples" in done.stdout and "cannot help" in done.stdout


def test_plan_json_carries_the_power_figures(tmp_path):
    done = cli("plan", str(ROOT / "configs/demo.toml"), "--json", "--mde", "0.3", cwd=tmp_path)
    found = json.loads(done.stdout)
    assert found["format"] == "bias-orchestrator-plan/1"
    power = found["power"]
    assert power["format"] == "bias-orchestrator-power/1" and power["target_mde"] == 0.3
    assert {r["experiment"] for r in power["tests"]} == {
        e["slug"] for e in found["jobs"][0]["experiments"]
    }
    assert all("samples_needed" in r for r in power["tests"])


@pytest.mark.parametrize(
    "args, said",
    [
        (["--mde", "0"], "--mde"),
        (["--mde", "nan"], "--mde"),
        (["--power", "1.5"], "--power"),
        (["--pilot", "no-such-run"], "no-such-run"),
    ],
)
def test_bad_input_exits_2_and_prints_nothing_on_stdout(tmp_path, args, said):
    done = cli("power", str(ROOT / "configs/demo.toml"), "--json", *args, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and said in done.stderr
    assert not any(tmp_path.iterdir())


def test_a_pilot_run_gives_its_answers_spread(tmp_path):
    """configs/simulated.toml plants anchoring answers with SD 120 (EUR) and a decoy share of
    0.45 in condition 0: a pilot of it gives MDEs in euros and from 0.45."""
    run = cli(
        "run",
        str(ROOT / "configs/simulated.toml"),
        "--output-dir",
        str(tmp_path / "runs"),
        "--samples",
        "40",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    pilot = next((tmp_path / "runs").glob("*/*/manifest.json")).parent
    done = cli(
        "power",
        str(ROOT / "configs/simulated.toml"),
        "--pilot",
        str(pilot),
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    anchoring = rows["anchoring-first-number"]
    assert anchoring["variance"].startswith(f"pilot simulated/{pilot.name}: sd ")
    sd = float(anchoring["variance"].split("sd ")[1].split(",")[0])
    assert 100 < sd < 140  # planted 120, over 80 answers
    planned = anchoring["samples"]
    t = stats.t(2 * planned - 2)
    assert anchoring["mde"] == pytest.approx(
        (t.ppf(0.975) + t.ppf(0.8)) * sd * math.sqrt(2 / planned), rel=0.01
    )
    assert anchoring["scale"] == "EUR"
    assert "ICC 0.00" in anchoring["variance"]  # one prompt a condition: no item spread
    decoy = rows["decoy-subscription-choice"]
    share = float(decoy["variance"].split("share ")[1].split(",")[0])
    assert 0.3 < share < 0.6  # planted 0.45 (a few answers are parse errors)
    # experiments the pilot planted nothing for still get its measured spread, stated
    assert all(r["variance"].startswith("pilot") for r in rows.values())


def test_a_pilot_share_of_0_still_gives_an_mde():
    """A model that never picks the target in the pilot: its share has no variance at an
    effect of exactly 0, which gave no MDE and no reason before."""
    from orchestrator.studies.paired.power import Spread, share_design

    found = mde(share_design(1, Spread(1.0, 0.0, 0.0), centred=False), 20, 0.05, 0.8)
    assert found is not None and 0.2 < found < 0.5


def test_a_target_beyond_a_million_samples_is_not_called_unreachable(tmp_path):
    """Where samples always help, the floor is 0 and a tiny target needs more than a million
    samples: not 'no number of samples reaches it'."""
    done = cli("power", str(ROOT / "configs/demo.toml"), "--mde", "0.001", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "more than 1,000,000 samples per cell to reach 0.001" in done.stdout
    assert "no number of samples reaches" not in done.stdout
    assert "-> 0" in done.stdout
    rows = _rows(cli("power", str(ROOT / "configs/demo.toml"), "--json", cwd=tmp_path).stdout)
    assert all(r["floor"] == 0 and r["model_label"].startswith("local") for r in rows.values())


def test_plan_prints_the_power_tables_when_asked_for_them(tmp_path):
    done = cli("plan", str(ROOT / "configs/demo.toml"), "--mde", "0.2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "paired: minimum detectable effects" in done.stdout and "samples for 0.2" in done.stdout
    plain = cli("plan", str(ROOT / "configs/demo.toml"), cwd=tmp_path)
    assert "minimum detectable effects" not in plain.stdout

"""Extreme numeric answers (issue 29, item 12), the job format and the bias-strength study: a
job's `plausibleRange` is checked when the job is read, and the anchoring variants of the Bias
Strength Index get a robust BSI, the dominated-mean flag and the implausible count beside the
paper's BSI (tests/test_extreme_answers.py has the statistics and the paired study)."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from orchestrator.analysis.summary import analyze
from orchestrator.cli import app
from tests.conftest import ROOT, run_quietly, write_config

RUNAWAY = 1.5e22


# --- the job format ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("experiment", "value", "said"),
    [
        (0, [5000, 10], "low < high"),
        (0, [10], "a list of two numbers"),
        (0, "0-100000", "a list of two numbers"),
        (0, [0, "lots"], "a list of two numbers"),
        (0, [True, 5], "a list of two numbers"),
        (2, [0, 1], "number only"),  # the decoy: a choice
    ],
)
def test_a_bad_plausible_range_is_refused_naming_file_and_field(
    tmp_path, monkeypatch, experiment, value, said
):
    monkeypatch.chdir(tmp_path)
    spec = json.loads((ROOT / "jobs" / "paired.json").read_text(encoding="utf-8"))
    spec["experiments"][experiment]["plausibleRange"] = value
    (tmp_path / "job.json").write_text(json.dumps(spec), encoding="utf-8")
    config = write_config(
        tmp_path,
        f'name = "bad"\njobs = ["job.json"]\noutput_dir = "{tmp_path / "runs"}"\n'
        '[[models]]\nprovider = "simulated"\nname = "m"\n',
    )
    result = CliRunner().invoke(app, ["plan", str(config)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "job.json" in flat and f"experiments[{experiment}].plausibleRange" in flat
    assert said in flat and "fix:" in flat and "Traceback" not in flat


def test_the_manifest_keeps_the_range_and_refuses_a_reversed_one():
    from orchestrator.spec.models import ResponseContract, Variant

    contract = ResponseContract(kind="number")
    assert Variant(id="v", prompt="p", contract=contract, plausible_range=(0, 9)).plausible_range
    with pytest.raises(ValueError, match="low < high"):
        Variant(id="v", prompt="p", contract=contract, plausible_range=(9, 0))


# --- bias-strength: the anchoring variants -----------------------------------------------------


def test_bias_strength_gives_a_robust_bsi_beside_a_runaway_one(tmp_path):
    spec = json.loads((ROOT / "tests" / "data" / "three-biases.json").read_text())
    spec["biases"] = [b for b in spec["biases"] if b["slug"] == "anchoring"]
    spec["biases"][0]["variants"][0]["plausibleRange"] = [0, 10_000]
    job = tmp_path / "numbers.json"
    job.write_text(json.dumps(spec))
    config = write_config(
        tmp_path,
        f"""
name = "runaway-bsi"
jobs = ["{job}"]
samples = 40
strategies = ["baseline"]
output_dir = "{tmp_path / "runs"}"
[[models]]
provider = "simulated"
name = "sim"
temperature = 0.7
[models.simulate.effects.anchoring]
conditions = [{{mean = 100, sd = 30}}, {{mean = 300, sd = 30}}]
""",
    )
    run_dir = run_quietly(config).run_dir
    path = run_dir / "results.ndjson"
    recs = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    hit = next(i for i, r in enumerate(recs) if r["variant"] == "a1" and r["conditionIndex"] == 1)
    recs[hit]["response"]["value"] = RUNAWAY
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))

    tables = analyze(run_dir).tables
    variants = {r["variant"]: r for r in tables["bsi_variants"].iter_rows(named=True)}
    a1 = variants["a1"]
    assert a1["bsi_signed"] > 1e15  # the paper's BSI, kept as it is
    assert a1["hl_shift"] == pytest.approx(200, abs=25) and a1["hl_ci_low"] > 100
    assert a1["bsi_robust_signed"] == pytest.approx(200 / 800, abs=0.04)
    assert a1["dominated"] is True and a1["n_implausible"] == 1 and a1["n_implausible_T"] == 1
    for other in ("a2", "a3"):  # ordinary answers, and no range declared
        assert variants[other]["dominated"] is False and variants[other]["n_implausible"] is None
    [bias] = tables["bsi_summary"].iter_rows(named=True)
    assert bias["dominated_variants"] == 1 and bias["n_implausible"] == 1
    assert "a few answers dominate the mean in 1 of 3 variants (a1)" in bias["robust_note"]
    assert bias["bsi_robust_signed"] == pytest.approx(
        np.mean([200 / 800, 200 / 1800, 200 / 2800]), rel=0.15
    )


def test_bias_strength_refuses_a_plausible_range_on_a_choice(tmp_path):
    from orchestrator.errors import UserError
    from orchestrator.session import load_job

    spec = json.loads((ROOT / "tests" / "data" / "three-biases.json").read_text())
    spec["biases"][0]["variants"][1]["plausibleRange"] = [0, 1]
    job = tmp_path / "job.json"
    job.write_text(json.dumps(spec))
    with pytest.raises(UserError) as caught:
        load_job(job)
    assert caught.value.field == "biases[0].variants[1].plausibleRange"
    assert caught.value.file == str(job) and "number only" in str(caught.value)

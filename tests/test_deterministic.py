"""A model at temperature 0 is deterministic: the planner gives it the seed's
deterministicMinimumSamplesPerCondition unless samples are set, and the paired analysis shows its
effect without a CI or p-value, since its repeated answers are one draw, not independent samples."""

from __future__ import annotations

import json

import jsonschema
import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from orchestrator.analysis.summary import analyze
from orchestrator.cli import app
from orchestrator.plan import Plan
from orchestrator.plan_changes import describe_changes
from orchestrator.session import load_campaign, load_job
from tests.conftest import ROOT, run_quietly, write_config

ALL_OR_NOTHING = """
[models.simulate.effects.escalation-past-investment]
conditions = [{shares = {"Continue" = 1.0}}, {shares = {"Continue" = 0.0}}]
"""


def _config(tmp_path, samples: str = "", name: str = "t0"):
    """The same planted respondent at temperature 0, at 1, and at the provider's default."""
    models = "".join(
        f"""
[[models]]
provider = "simulated"
name = "sim"
{temperature}
{ALL_OR_NOTHING}"""
        for temperature in ("temperature = 0.0", "temperature = 1.0", "")
    )
    return write_config(
        tmp_path,
        f"""
name = "{name}"
jobs = ["paired"]
{samples}
output_dir = "{tmp_path / "runs"}"
{models}""",
    )


def _temperatures(run_dir) -> dict[str, float | None]:
    """Model key -> temperature, as every result records it."""
    records = map(orjson.loads, (run_dir / "results.ndjson").read_bytes().splitlines())
    return {r["modelKey"]: r["model"]["temperature"] for r in records}


def _by_temperature(summary: pl.DataFrame, run_dir, slug: str) -> dict:
    temperature = _temperatures(run_dir)
    rows = summary.filter(pl.col("experimentSlug") == slug).iter_rows(named=True)
    return {temperature[r["modelKey"]]: r for r in rows}


def _status_row(output: str, key: str) -> list[str]:
    [line] = [line for line in output.splitlines() if key in line]
    return [cell.strip() for cell in line.split("│")[2:-1]]


def test_the_seed_states_its_deterministic_minimum():
    job = load_job(ROOT / "jobs" / "paired.json")
    assert (job.min_samples, job.deterministic_min_samples) == (20, 1)
    assert job.min_samples_for(True) == 1 and job.min_samples_for(False) == 20


@pytest.mark.slow
def test_twenty_identical_draws_at_temperature_0_get_no_ci_or_p(tmp_path, monkeypatch):
    """20/20 vs 0/20 at T=0 is one answer per condition seen twenty times: no p = 2.5e-10."""
    monkeypatch.chdir(tmp_path)
    outcome = run_quietly(_config(tmp_path, "samples = 20"))
    summary = analyze(outcome.run_dir).tables["summary"]
    rows = _by_temperature(summary, outcome.run_dir, "escalation-past-investment")
    cold, warm, default = rows[0.0], rows[1.0], rows[None]
    assert (cold["n_valid_0"], cold["n_valid_1"], cold["stat_0"], cold["stat_1"]) == (
        20,
        20,
        1.0,
        0.0,
    )
    assert cold["effect"] == 1.0
    assert (cold["p_value"], cold["ci_low"], cold["ci_high"], cold["significant"]) == (None,) * 4
    assert cold["deterministic"] is True
    assert (
        "deterministic answers at T=0: repeated draws are not independent samples; "
        "effect shown without CI/p"
    ) in cold["flags"]
    assert not any(f.startswith("no CI") for f in cold["flags"])
    for sampled in (warm, default):  # the same answers from a model that samples are evidence
        assert sampled["deterministic"] is False and sampled["flags"] == []
        assert sampled["p_value"] == pytest.approx(2.5e-10, rel=0.05) and sampled["significant"]
        assert sampled["ci_low"] > 0.7 and sampled["ci_high"] == 1.0
    # every experiment of the T=0 model, not only the planted one
    fixed = summary.filter(pl.col("deterministic"))
    assert (
        fixed.height == 6
        and fixed["p_value"].null_count() == 6
        and fixed["ci_low"].null_count() == 6
    )
    assert summary.filter(~pl.col("deterministic"))["p_value"].null_count() == 0

    shown = CliRunner().invoke(app, ["analyze", str(outcome.run_dir)], env={"COLUMNS": "400"})
    assert shown.output.count("simulated/sim (T=0)") == 6  # told apart from the same model sampling
    report = CliRunner().invoke(app, ["report", str(outcome.run_dir)])
    assert report.exit_code == 0, report.output
    text = (outcome.run_dir / "report" / "report.md").read_text()
    assert text.count("deterministic answers at T=0") == 6
    # the published record format is unchanged: every exported record still validates
    assert CliRunner().invoke(app, ["export", str(outcome.run_dir)]).exit_code == 0
    schema = json.loads(
        (ROOT / "docs" / "schemas" / "ai-benchmark-results.schema.json").read_text()
    )
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    files = sorted((outcome.run_dir / "export" / "ai-benchmark").glob("*.ndjson"))
    assert len(files) == 3
    for path in files:
        for line in path.read_bytes().splitlines():
            validator.validate(orjson.loads(line))


def test_a_deterministic_model_is_planned_the_deterministic_minimum_by_default(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    cfg = _config(tmp_path)
    plan = Plan(load_campaign(cfg))
    cold, warm, default = plan.campaign.config.models
    assert plan.per_model() == {cold.key: 6 * 2 * 1, warm.key: 6 * 2 * 20, default.key: 6 * 2 * 20}
    assert plan.fingerprint()["samples_by_model"] == {
        cold.key: {"paired": 1},
        warm.key: {"paired": 20},
        default.key: {"paired": 20},
    }
    shown = CliRunner().invoke(app, ["plan", str(cfg)])
    assert shown.exit_code == 0 and "total: 492 calls across 3 model(s)" in shown.output
    # samples set by the user, in the config or by --samples, apply to every model alike
    assert set(Plan(load_campaign(_config(tmp_path, "samples = 5"))).per_model().values()) == {60}
    flag = CliRunner().invoke(app, ["plan", str(cfg), "--samples", "3"])
    assert "total: 108 calls across 3 model(s)" in flag.output


def test_a_deterministic_run_is_complete_adequate_and_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _config(tmp_path)
    outcome = run_quietly(cfg)
    summary = analyze(outcome.run_dir).tables["summary"]
    rows = _by_temperature(summary, outcome.run_dir, "anchoring-first-number")
    assert (rows[0.0]["planned_per_condition"], rows[0.0]["min_samples"]) == (1, 1)
    assert (rows[1.0]["planned_per_condition"], rows[1.0]["min_samples"]) == (20, 20)
    for row in rows.values():  # nothing unfinished, nothing below its minimum
        assert row["adequate"] and not any(
            f.startswith(("unfinished", "valid n")) for f in row["flags"]
        )
    lines = (outcome.run_dir / "results.ndjson").read_bytes()
    for again in ([str(cfg)], [str(outcome.run_dir)]):  # by its config, and by its folder
        result = CliRunner().invoke(app, ["run", *again])
        assert result.exit_code == 0, result.output
    assert (outcome.run_dir / "results.ndjson").read_bytes() == lines  # nothing re-asked
    status = CliRunner().invoke(app, ["status", str(outcome.run_dir)], env={"COLUMNS": "200"})
    assert status.exit_code == 0 and "complete" in status.output
    for key, temperature in _temperatures(outcome.run_dir).items():  # tasks, ok, ..., pending
        tasks = "12" if temperature == 0 else "240"
        assert _status_row(status.output, key)[:2] == [tasks, tasks]
        assert _status_row(status.output, key)[6] == "0"


def test_a_run_planned_before_the_deterministic_minimum_names_what_changed(tmp_path):
    """Such a run gave its T=0 model the job's 20; resuming it by its config says why not now."""
    new = Plan(load_campaign(_config(tmp_path))).fingerprint()
    old = {k: v for k, v in new.items() if k != "samples_by_model"}
    old = {**old, "tasks": 720, "per_model": {k: 240 for k in new["per_model"]}}
    assert describe_changes(old, new) == [
        "samples of paired on simulated/sim: 20 -> 1 (at temperature 0 the default "
        "is the job's deterministic minimum; set samples to choose)",
        "tasks: 720 -> 492",
    ]


def test_the_rehearsal_config_samples_so_its_report_shows_intervals():
    plan = Plan(load_campaign(ROOT / "configs" / "simulated.toml"))
    [model] = plan.campaign.config.models
    assert not model.deterministic and plan.per_model() == {model.key: 6 * 2 * 20}

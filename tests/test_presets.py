"""Presets are services of their own: their own limit key, their name in every label, and the
same task ids as the model they fill in (the label is not part of the identity)."""

from __future__ import annotations

import csv

from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.cli.plan import _duration
from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from tests.conftest import write_config

GROQ_LABEL = "groq:openai/llama-3.1-8b-instant"


def _config(
    tmp_path,
    groq_url: str,
    openai_url: str,
    *,
    groq_model: str | None = None,
    limits: str = "",
    name: str = "campaign.toml",
):
    groq_model = groq_model or 'preset = "groq"'
    return write_config(
        tmp_path,
        f"""
        name = "presets"
        jobs = ["paired"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        {groq_model}
        name = "llama-3.1-8b-instant"
        base_url = "{groq_url}"
        [[models]]
        preset = "openai"
        name = "gpt-4o-mini"
        base_url = "{openai_url}"
        {limits}
        """,
        name=name,
    )


def test_a_preset_gets_its_own_limit_key_and_its_name_in_the_label(tmp_path):
    cfg = _config(
        tmp_path,
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        limits="""
        [limits.groq]
        rpm = 1
        [limits.openai]
        rpm = 1000
        """,
    )
    groq, openai = load_campaign(cfg).config.models
    assert (groq.limit_key, groq.label) == ("groq", GROQ_LABEL)
    assert (openai.limit_key, openai.label) == ("openai", "openai/gpt-4o-mini")
    result = CliRunner().invoke(app, ["plan", str(cfg)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    calls = Plan(load_campaign(cfg)).per_model()[groq.key]
    # each key is paced at its own rate: Groq's 1 rpm does not slow OpenAI down, nor the reverse
    assert f"limit key 'groq': {_duration(calls * 60 / 1)} at its configured rate" in flat
    assert f"limit key 'openai': {_duration(calls * 60 / 1000)} at its configured rate" in flat
    assert f"job paired on {GROQ_LABEL}" in flat


def test_the_label_is_not_part_of_the_task_ids(tmp_path):
    url = "http://127.0.0.1:9/v1"
    with_preset = load_campaign(_config(tmp_path, url, url))
    same_by_hand = load_campaign(
        _config(
            tmp_path,
            url,
            url,
            name="by-hand.toml",
            groq_model=('provider = "openai"\n        api_key_env = "GROQ_API_KEY"'),
        )
    )
    a, b = with_preset.config.models[0], same_by_hand.config.models[0]
    assert a.label != b.label and a.limit_key != b.limit_key
    assert [t.task_id for t in Plan(with_preset).tasks()] == [
        t.task_id for t in Plan(same_by_hand).tasks()
    ]


def test_an_extractor_may_have_a_limit_table_of_its_own(tmp_path):
    cfg = _config(
        tmp_path,
        "http://127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1",
        limits="""
        [extractor]
        preset = "groq"
        name = "llama-3.1-8b-instant"
        limit = "extraction"
        [limits.extraction]
        rpm = 30
        """,
    )
    campaign = load_campaign(cfg)
    assert campaign.config.extractor.api_key_env == "GROQ_API_KEY"  # the preset applies to it too
    assert campaign.config.extractor.limit_key == "extraction"


def test_status_and_analysis_show_the_preset_in_the_label(tmp_path, emulator, monkeypatch):
    monkeypatch.setenv("GROQ_API_KEY", "test-groq")
    monkeypatch.setenv("OPENAI_API_KEY", "test-openai")
    groq, openai = emulator(), emulator()
    cfg = _config(tmp_path, groq.base_url("openai"), openai.base_url("openai"))
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 0
    assert groq.log.bodies and openai.log.bodies  # each model went to its own server
    run_dir = tmp_path / "runs" / "presets" / "default"
    status = " ".join(CliRunner().invoke(app, ["status", str(run_dir)]).output.split())
    assert GROQ_LABEL in status and "openai/gpt-4o-mini" in status
    assert CliRunner().invoke(app, ["analyze", str(run_dir)]).exit_code == 0
    with open(run_dir / "summary.csv", newline="") as f:
        labels = {row["model"] for row in csv.DictReader(f)}
    assert labels == {GROQ_LABEL, "openai/gpt-4o-mini"}

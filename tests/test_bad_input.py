"""Bad input: one clear message naming file, field and fix; exit code 2; nothing written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.conftest import ROOT, write_config

SEED = json.loads((ROOT / "jobs" / "ai-bias-benchmark.json").read_text(encoding="utf-8"))


def _job(tmp_path: Path, mutate) -> str:
    spec = json.loads(json.dumps(SEED))
    mutate(spec)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def _config(tmp_path: Path, *, job: str = "ai-bias-benchmark", model: str = 'provider = "simulated"\nname = "m"',
            top: str = "") -> Path:
    return write_config(tmp_path, f"""
name = "bad"
jobs = ["{job}"]
output_dir = "{tmp_path / 'runs'}"
{top}
[[models]]
{model}
""")


def _case_malformed_toml(tmp_path):
    return write_config(tmp_path, 'name = "x"\njobs = ["a"]\nseed = 1 2\n'), "campaign.toml", "line 3"


def _case_malformed_json(tmp_path):
    path = tmp_path / "job.json"
    path.write_text('{"protocol": {"systemPrompt": "x",}', encoding="utf-8")
    return _config(tmp_path, job=str(path)), "job.json", "line 1, column"


CASES = {
    "malformed TOML": _case_malformed_toml,
    "malformed JSON": _case_malformed_json,
    "missing field": lambda p: (_config(p, model='provider = "simulated"'), "models[0].name", "add the required field 'name'"),
    "mistyped field": lambda p: (_config(p, model='provider = "simulated"\nname = "m"\ntemperature = "hot"'),
                                 "models[0].temperature", "expected type"),
    "unknown provider": lambda p: (_config(p, model='provider = "openia"\nname = "m"'), "models[0].provider",
                                   "known: openai, anthropic, gemini, local, simulated"),
    "duplicate slug": lambda p: (_config(p, job=_job(p, lambda s: s["experiments"][1].update(
        experimentSlug=s["experiments"][0]["experimentSlug"]))), "experiments[1].experimentSlug", "its own slug"),
    "empty conditions": lambda p: (_config(p, job=_job(p, lambda s: s["experiments"][2].update(conditions=[]))),
                                   "experiments[2].conditions", "at least 2 items"),
    "samples < 1": lambda p: (_config(p, top="samples = 0"), "samples", "greater than or equal to 1"),
    "base_url without scheme": lambda p: (_config(p, model='provider = "openai"\nname = "m"\nbase_url = "localhost:8000/v1"'),
                                          "models[0].base_url", "http://localhost:8000/v1"),
    "unknown job": lambda p: (_config(p, job="no-such-job"), "jobs[0]", "ai-bias-benchmark"),
    "missing api key": lambda p: (_config(p, model='provider = "openai"\nname = "m"\nbase_url = "http://127.0.0.1:9"\n'
                                          'api_key_env = "ORCH_TEST_UNSET_KEY"'), "models[0].api_key_env", "ORCH_TEST_UNSET_KEY", "export"),
}


# `plan` starts nothing and needs no key, so only `run` checks it.
COMMAND_CASES = [(cmd, case) for cmd in ("run", "plan") for case in CASES
                 if not (cmd == "plan" and case == "missing api key")]


@pytest.mark.parametrize(("command", "case"), COMMAND_CASES)
def test_bad_input_is_one_clear_message_and_nothing_is_written(tmp_path, case, command, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config, *expected = CASES[case](tmp_path)
    result = CliRunner().invoke(app, [command, str(config)])
    message = result.stderr if hasattr(result, "stderr") else result.output
    flat = " ".join(message.split())
    assert result.exit_code == 2, result.output
    assert "error:" in flat and "fix:" in flat
    for piece in expected:
        assert piece in flat, f"{piece!r} not in {flat!r}"
    named_file = "job.json" if case in {"malformed JSON", "duplicate slug", "empty conditions"} else config.name
    assert named_file in flat
    assert not (tmp_path / "runs").exists()
    assert "Traceback" not in message


def test_a_changed_plan_is_refused_naming_what_changed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _config(tmp_path, top="samples = 2")
    assert CliRunner().invoke(app, ["run", str(config)]).exit_code == 0
    changed = _config(tmp_path, top="samples = 3")
    result = CliRunner().invoke(app, ["run", str(changed)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2
    assert "samples of ai-bias-benchmark: 2 -> 3" in flat and "tasks: 24 -> 36" in flat
    assert "--run-id" in flat

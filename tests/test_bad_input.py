"""Bad input: one clear message naming file, field and fix; exit code 2; nothing written."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.conftest import ROOT, cli, write_config

SEED = json.loads((ROOT / "jobs" / "paired.json").read_text(encoding="utf-8"))
# A key-shaped value and a plain password: no message may ever print either back.
SECRET = "sk-test-4f9a8b7c6d5e4f3a2b1c0d9e"
PASSWORD = "hunter2hunter2"
BOM = b"\xef\xbb\xbf"


def _job(tmp_path: Path, mutate) -> str:
    spec = json.loads(json.dumps(SEED))
    mutate(spec)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def _config(
    tmp_path: Path,
    *,
    job: str = "paired",
    model: str = 'provider = "simulated"\nname = "m"',
    top: str = "",
    output_dir: Path | None = None,
) -> Path:
    return write_config(
        tmp_path,
        f"""
name = "bad"
jobs = ["{job}"]
output_dir = "{output_dir or tmp_path / "runs"}"
{top}
[[models]]
{model}
""",
    )


def _flat(message: str) -> str:
    """The message on one line, without the frame rich draws around usage errors."""
    return " ".join(message.replace("│", " ").split())


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its content (None for a folder): to show nothing was written."""
    return {str(p): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def _openai(extra: str) -> str:
    return f'provider = "openai"\nname = "m"\n{extra}'


def _case_malformed_toml(tmp_path):
    return (
        write_config(tmp_path, 'name = "x"\njobs = ["a"]\nseed = 1 2\n'),
        "campaign.toml",
        "line 3",
    )


def _case_malformed_json(tmp_path):
    path = tmp_path / "job.json"
    path.write_text('{"protocol": {"systemPrompt": "x",}', encoding="utf-8")
    return _config(tmp_path, job=str(path)), "job.json", "line 1, column"


def _case_bom_config(tmp_path):
    path = _config(tmp_path)
    path.write_bytes(BOM + path.read_bytes())
    return path, "byte-order mark", "save it without BOM"


def _case_bom_job(tmp_path):
    path = tmp_path / "job.json"
    path.write_bytes(BOM + json.dumps(SEED).encode())
    return _config(tmp_path, job=str(path)), "byte-order mark", "save it without BOM"


def _case_output_dir_is_a_file(tmp_path):
    (tmp_path / "runs.txt").write_text("not a folder")
    return _config(tmp_path, output_dir=tmp_path / "runs.txt"), "output_dir", "runs.txt' is a file"


def _case_output_dir_under_a_file(tmp_path):
    (tmp_path / "notes").write_text("not a folder")
    return (
        _config(tmp_path, output_dir=tmp_path / "notes" / "runs"),
        "output_dir",
        "notes' is a file",
    )


# Valid on the old code only where loopback port 9 refuses: a regression fails fast, offline.
ONE_ATTEMPT = "[limits.openai]\nmax_attempts = 1"


CASES = {
    "malformed TOML": _case_malformed_toml,
    "malformed JSON": _case_malformed_json,
    "missing field": lambda p: (
        _config(p, model='provider = "simulated"'),
        "models[0].name",
        "add the required field 'name'",
    ),
    "mistyped field": lambda p: (
        _config(p, model='provider = "simulated"\nname = "m"\ntemperature = "hot"'),
        "models[0].temperature",
        "expected type",
    ),
    "unknown provider": lambda p: (
        _config(p, model='provider = "openia"\nname = "m"'),
        "models[0].provider",
        "known: openai, anthropic, gemini, local, simulated",
    ),
    "duplicate slug": lambda p: (
        _config(
            p,
            job=_job(
                p,
                lambda s: s["experiments"][1].update(
                    experimentSlug=s["experiments"][0]["experimentSlug"]
                ),
            ),
        ),
        "experiments[1].experimentSlug",
        "its own slug",
    ),
    "empty conditions": lambda p: (
        _config(p, job=_job(p, lambda s: s["experiments"][2].update(conditions=[]))),
        "experiments[2].conditions",
        "at least 2 items",
    ),
    "samples < 1": lambda p: (
        _config(p, top="samples = 0"),
        "samples",
        "greater than or equal to 1",
    ),
    "base_url without scheme": lambda p: (
        _config(p, model='provider = "openai"\nname = "m"\nbase_url = "localhost:8000/v1"'),
        "models[0].base_url",
        "http://localhost:8000/v1",
    ),
    "unknown job": lambda p: (_config(p, job="no-such-job"), "jobs[0]", "paired"),
    "missing api key": lambda p: (
        _config(
            p,
            model='provider = "openai"\nname = "m"\nbase_url = "http://127.0.0.1:9"\n'
            'api_key_env = "ORCH_TEST_UNSET_KEY"',
        ),
        "models[0].api_key_env",
        "ORCH_TEST_UNSET_KEY",
        "export",
    ),
    "BOM in config": _case_bom_config,
    "BOM in job file": _case_bom_job,
    "samples = true": lambda p: (
        _config(p, top="samples = true"),
        "field 'samples'",
        "valid integer",
    ),
    "max_in_flight = true": lambda p: (
        _config(p, top="[limits.simulated]\nmax_in_flight = true"),
        "limits.simulated.max_in_flight",
        "valid integer",
    ),
    "temperature = true": lambda p: (
        _config(p, model='provider = "simulated"\nname = "m"\ntemperature = true'),
        "models[0].temperature",
        "valid number",
    ),
    "temperature above anthropic's 1": lambda p: (
        _config(p, model='provider = "anthropic"\nname = "m"\ntemperature = 1.5'),
        "models[0].temperature",
        "0 to 1",
        "between 0 and 1",
    ),
    "temperature above openai's 2": lambda p: (
        _config(
            p,
            model=_openai('base_url = "http://127.0.0.1:9/v1"\ntemperature = 2.5'),
            top=ONE_ATTEMPT,
        ),
        "models[0].temperature",
        "between 0 and 2",
    ),
    "simulate effect for an unknown experiment": lambda p: (
        _config(
            p,
            model='provider = "simulated"\nname = "m"\n'
            "[models.simulate.effects.anchoring-frist-number]\n"
            "conditions = [{mean = 1}, {mean = 2}]",
        ),
        "models[0].simulate.effects.anchoring-frist-number",
        "anchoring-first-number",
    ),
    "limit table no model uses": lambda p: (
        _config(p, top="[limits.openai]\nrpm = 5"),
        "limits.openai",
        "in use: simulated",
    ),
    "preset limit table named after the protocol": lambda p: (
        _config(
            p,
            model='preset = "groq"\nname = "m"\nbase_url = "http://127.0.0.1:9/v1"',
            top="[limits.openai]\nrpm = 5",
        ),
        "limits.openai",
        "in use: groq",
    ),
    "output_dir is a file": _case_output_dir_is_a_file,
    "output_dir cannot be created": _case_output_dir_under_a_file,
    # keys pasted into the config: refused without printing them back
    "api key in the config": lambda p: (
        _config(
            p,
            model=_openai(f'base_url = "http://127.0.0.1:9/v1"\napi_key = "{SECRET}"'),
            top=ONE_ATTEMPT,
        ),
        "models[0].api_key",
        'api_key_env = "MY_KEY"',
        "export MY_KEY=",
    ),
    "password in the config": lambda p: (
        _config(p, model=f'provider = "simulated"\nname = "m"\npassword = "{PASSWORD}"'),
        "models[0].password",
        'api_key_env = "MY_KEY"',
    ),
    "key-shaped value of another field": lambda p: (
        _config(p, top=f'seed = "{SECRET}"'),
        "field 'seed'",
        "valid integer",
    ),
    "api_key_env holding the key": lambda p: (
        _config(
            p,
            model=_openai(f'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "{SECRET}"'),
            top=ONE_ATTEMPT,
        ),
        "models[0].api_key_env",
        "not the key itself",
        "export MY_KEY=",
    ),
    "key in base_url user part": lambda p: (
        _config(p, model=_openai(f'base_url = "http://{SECRET}@127.0.0.1:9/v1"'), top=ONE_ATTEMPT),
        "models[0].base_url",
        "user part",
        "api_key_env",
    ),
    "key in base_url query": lambda p: (
        _config(
            p,
            model=_openai(f'base_url = "http://127.0.0.1:9/v1?api_key={SECRET}"'),
            top=ONE_ATTEMPT,
        ),
        "models[0].base_url",
        "query parameter 'api_key'",
        "api_key_env",
    ),
}


# `plan` starts nothing and needs no key, so only `run` checks it.
COMMAND_CASES = [
    (cmd, case)
    for cmd in ("run", "plan")
    for case in CASES
    if not (cmd == "plan" and case == "missing api key")
]


@pytest.mark.parametrize(("command", "case"), COMMAND_CASES)
def test_bad_input_is_one_clear_message_and_nothing_is_written(
    tmp_path, case, command, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    config, *expected = CASES[case](tmp_path)
    before = _tree(tmp_path)
    result = CliRunner().invoke(app, [command, str(config)])
    message = result.stderr if hasattr(result, "stderr") else result.output
    flat = " ".join(message.split())
    assert result.exit_code == 2, result.output
    assert "error:" in flat and "fix:" in flat
    for piece in expected:
        assert piece in flat, f"{piece!r} not in {flat!r}"
    named_file = (
        "job.json"
        if case in {"malformed JSON", "duplicate slug", "empty conditions", "BOM in job file"}
        else config.name
    )
    assert named_file in flat
    assert not (tmp_path / "runs").exists()
    assert _tree(tmp_path) == before
    assert "Traceback" not in message
    assert (
        SECRET not in result.output
        and SECRET[8:] not in result.output
        and PASSWORD not in result.output
    )


def test_a_changed_plan_is_refused_naming_what_changed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _config(tmp_path, top="samples = 2")
    assert CliRunner().invoke(app, ["run", str(config)]).exit_code == 0
    changed = _config(tmp_path, top="samples = 3")
    result = CliRunner().invoke(app, ["run", str(changed)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2
    assert "samples of paired: 2 -> 3" in flat and "tasks: 24 -> 36" in flat
    assert "--run-id" in flat


# A flag's bad value is blamed on the flag, not on a config field it overrides; --budget takes
# only a finite number of dollars >= 0 (nan or inf would disable the budget).
FLAG_CASES = {
    "--samples 0 (run)": (
        ["run", "CONFIG", "--samples", "0"],
        ["option '--samples'", "greater than or equal to 1"],
    ),
    "--samples 0 (plan)": (
        ["plan", "CONFIG", "--samples", "0"],
        ["option '--samples'", "greater than or equal to 1"],
    ),
    "--run-id with a space": (
        ["run", "CONFIG", "--run-id", "a b"],
        ["option '--run-id'", "pattern"],
    ),
    "--budget nan": (
        ["run", "CONFIG", "--budget", "nan"],
        ["'--budget'", "finite number >= 0", "fix: e.g. --budget 5"],
    ),
    "--budget inf": (["run", "CONFIG", "--budget", "inf"], ["'--budget'", "finite number >= 0"]),
    "--budget -1": (["run", "CONFIG", "--budget", "-1"], ["'--budget'", "finite number >= 0"]),
    "--budget abc": (
        ["run", "CONFIG", "--budget", "abc"],
        ["'--budget'"],
    ),  # typer's own usage error
}


@pytest.mark.parametrize("case", FLAG_CASES)
def test_a_bad_flag_value_is_blamed_on_the_flag_and_nothing_is_written(tmp_path, case, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _config(tmp_path, top="samples = 1")
    args, expected = FLAG_CASES[case]
    before = _tree(tmp_path)
    result = CliRunner().invoke(app, [str(config) if a == "CONFIG" else a for a in args])
    flat = _flat(result.output)
    assert result.exit_code == 2, result.output
    for piece in expected:
        assert piece in flat, f"{piece!r} not in {flat!r}"
    assert "field 'samples'" not in flat and "field 'run_id'" not in flat
    assert "Traceback" not in result.output
    assert _tree(tmp_path) == before


def _emulate(*args: str) -> subprocess.CompletedProcess:
    # A timeout: an emulator that wrongly starts would otherwise serve forever.
    return cli("emulate", *args, cwd=ROOT, timeout=60)


@pytest.mark.parametrize(
    "args",
    [
        ["--port", "70000"],
        ["--rpm", "0"],
        ["--tpm", "-5"],
        ["--period-s", "0"],
        ["--error-rate", "1.5"],
        ["--drop-rate", "nan"],
        ["--latency-ms", "-1"],
    ],
    ids=" ".join,
)
def test_emulate_refuses_values_out_of_range_naming_the_flag(args):
    result = _emulate("--port", "0", *args)
    flat = _flat(result.stdout + result.stderr)
    assert result.returncode == 2, flat
    assert f"'{args[0]}'" in flat and f"fix: e.g. {args[0]}" in flat
    assert "Traceback" not in result.stderr and "listening on" not in flat


def test_emulate_on_a_port_in_use_says_so():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _emulate("--port", str(port))
    flat = _flat(result.stdout + result.stderr)
    assert result.returncode == 2, flat
    assert f"option '--port': cannot listen on 127.0.0.1:{port}: Address already in use" in flat
    assert "fix: pick another port, or --port 0" in flat
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("out", ["file", "file/sub"])
def test_export_to_a_file_is_refused_and_nothing_is_written(tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    assert (
        CliRunner().invoke(app, ["run", str(_config(tmp_path, top="samples = 1"))]).exit_code == 0
    )
    run_dir = tmp_path / "runs" / "bad" / "default"
    (tmp_path / "file").write_text("mine")
    before = _tree(tmp_path)
    result = CliRunner().invoke(app, ["export", str(run_dir), "--out", str(tmp_path / out)])
    flat = _flat(result.output)
    assert result.exit_code == 2, result.output
    assert (
        "option '--out'" in flat
        and f"{tmp_path / 'file'}' is a file" in flat
        and "fix: give --out a folder" in flat
    )
    assert "Traceback" not in result.output
    assert _tree(tmp_path) == before

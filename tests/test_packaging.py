"""The package as a user gets it: the built-in files found from any folder, `orchestrator init`,
and a wheel installed into a clean virtualenv running a campaign."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator import __version__
from orchestrator.cli import app
from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from orchestrator.spec.builtin import builtin_dir
from tests.conftest import ROOT

BUILTIN = {"jobs": "*.json*", "configs": "*.toml"}  # jobs: JSON job files and JSONL trace sets


def test_every_package_of_the_source_tree_is_listed_in_pyproject():
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "orchestrator").rglob("__init__.py")
    }
    assert not found - set(listed), (
        f"add {sorted(found - set(listed))} to [tool.setuptools] "
        f"packages in pyproject.toml, or the wheel leaves them out"
    )
    assert set(listed) - found == {"orchestrator.jobs", "orchestrator.configs"}


def test_a_checkout_reads_the_top_level_folders():
    for kind in BUILTIN:
        assert builtin_dir(kind) == ROOT / kind


def test_a_built_in_job_plans_from_another_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(
        'name = "c"\njobs = ["judge-history"]\n[[models]]\n'
        'preset = "openai"\nname = "gpt-4o-mini"\n'
    )
    result = CliRunner().invoke(app, ["plan", "c.toml"])
    assert result.exit_code == 0, result.output
    assert "job judge-history on openai/gpt-4o-mini" in result.output
    assert "no price" not in result.output  # the built-in price table was read


def test_version_is_printed_and_written_where_runs_record_it():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"bias-orchestrator {__version__}"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]  # read from orchestrator/__init__.py
    assert f"## {__version__}" in (ROOT / "CHANGELOG.md").read_text()


def _init(folder: Path):
    return CliRunner().invoke(app, ["init", str(folder)])


def test_init_writes_a_config_that_loads_and_plans(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _init(tmp_path / "new")
    assert result.exit_code == 0, result.output
    config = tmp_path / "new" / "campaign.toml"
    assert f"wrote {config}" in result.output and f"orchestrator plan {config}" in result.output
    plan = Plan(load_campaign(config))
    assert {m.provider for m in plan.campaign.config.models} == {"simulated", "local"}
    assert plan.total == 2 * 240  # 6 experiments x 2 conditions x 20 samples, per model
    assert CliRunner().invoke(app, ["plan", str(config)]).exit_code == 0


def test_init_without_the_local_extra_comments_the_local_model_out(tmp_path, monkeypatch):
    monkeypatch.setattr("orchestrator.spec.localmodel.DEFAULT_PACKAGE", "no_such_weights_package")
    monkeypatch.chdir(tmp_path)
    result = _init(tmp_path)
    assert result.exit_code == 0, result.output
    assert "local model is commented out" in " ".join(result.output.split())
    text = (tmp_path / "campaign.toml").read_text()
    assert '# provider = "local"' in text and "pip install 'bias-orchestrator[local]'" in text
    models = load_campaign(tmp_path / "campaign.toml").config.models
    assert [m.provider for m in models] == ["simulated"]


def test_init_examples_are_valid_once_uncommented(tmp_path, monkeypatch):
    """Every commented setting, the presets and prices lines included, is a config as written."""
    monkeypatch.chdir(tmp_path)
    assert _init(tmp_path).exit_code == 0
    for name in ("presets.toml", "prices.toml"):  # as the comment says: copy them beside it
        shutil.copy(builtin_dir("configs") / name, tmp_path / name)
    config = tmp_path / "campaign.toml"
    setting = re.compile(r"^# (?=\[|[a-z_]+ = )", re.MULTILINE)
    text, n = setting.subn("", config.read_text())
    config.write_text(text)
    assert n > 20
    models = Plan(load_campaign(config)).campaign.config.models
    assert [m.label for m in models] == [
        "simulated/sim-respondent",
        "local/SmolLM2-135M-Instruct.Q4_1",
        "openai/gpt-4o-mini",
        "anthropic/claude-3-5-haiku-latest",
        "gemini/gemini-1.5-flash",
        "groq:openai/llama-3.1-8b-instant",
    ]
    assert models[2].price is not None  # read from the copied price table


def test_init_never_overwrites(tmp_path):
    config = tmp_path / "campaign.toml"
    config.write_text("mine")
    result = _init(tmp_path)
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert "already exists" in flat and "fix: give another folder" in flat
    assert config.read_text() == "mine"


def test_init_into_a_file_writes_nothing(tmp_path):
    (tmp_path / "afile").write_text("x")
    result = _init(tmp_path / "afile" / "sub")
    assert result.exit_code == 2
    assert "is a file, not a folder" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


# ---- the wheel, installed into a clean virtualenv ---------------------------------------------


def _sh(*args, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, (
        f"{args} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


@pytest.mark.wheel
def test_the_wheel_runs_a_campaign_from_a_clean_virtualenv(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["COLUMNS"] = "200"
    # Build from a copy of what the wheel is made of: a stale build/ in the checkout cannot leak in.
    src = tmp_path / "src"
    for folder in ("orchestrator", "jobs", "configs"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for file in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / file, src / file)
    _sh(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--quiet",
        "-w",
        tmp_path / "dist",
        src,
        cwd=tmp_path,
        env=env,
    )
    [wheel] = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.startswith(f"bias_orchestrator-{__version__}-")  # one source of the version
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"orchestrator/{p.relative_to(ROOT / 'orchestrator').as_posix()}"
        for p in (ROOT / "orchestrator").rglob("*.py")
    }
    expected |= {
        f"orchestrator/{kind}/{p.name}"
        for kind, glob in BUILTIN.items()
        for p in (ROOT / kind).glob(glob)
    }
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)}"

    venv = tmp_path / "venv"
    _sh(sys.executable, "-m", "venv", venv, cwd=tmp_path, env=env)
    _sh(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path, env=env)
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = _sh(
        venv / "bin" / "python",
        "-c",
        "import orchestrator; print(orchestrator.__file__)",
        cwd=work,
        env=env,
    )
    assert where.startswith(str(venv)), where

    cli = venv / "bin" / "orchestrator"
    assert _sh(cli, "--version", cwd=work, env=env).strip() == f"bias-orchestrator {__version__}"
    init = _sh(cli, "init", cwd=work, env=env)
    assert "local model is commented out" in init  # no [local] extra in this venv
    plan = _sh(cli, "plan", "campaign.toml", "--samples", "3", cwd=work, env=env)
    assert "job paired on simulated/sim-respondent" in plan
    assert "total: 36 calls" in plan
    run = _sh(cli, "run", "campaign.toml", "--samples", "3", cwd=work, env=env)
    assert "results: runs/starter/default/results.ndjson" in run
    analyze = _sh(cli, "analyze", "runs/starter/default", cwd=work, env=env)
    assert "anchoring-first-number" in analyze
    report = _sh(cli, "report", "runs/starter/default", cwd=work, env=env)
    assert (work / "runs/starter/default/report/report.html").is_file(), report
    # A built-in job of each other study, and the built-in presets and prices.
    (work / "c.toml").write_text(
        'name = "c"\njobs = ["judge-history", "bias-strength"]\n'
        '[[models]]\npreset = "openai"\nname = "gpt-4o-mini"\n'
    )
    plan = _sh(cli, "plan", "c.toml", cwd=work, env=env)
    assert "job bias-strength on openai/gpt-4o-mini" in plan and "no price" not in plan
    # The other studies' analyses (scipy) without the dev extras, statsmodels among them: none installed.
    dev_present = _sh(
        venv / "bin" / "python",
        "-c",
        "import importlib.util as u; print([m for m in "
        "('pytest', 'jsonschema', 'hypothesis', 'statsmodels') if u.find_spec(m)])",
        cwd=work,
        env=env,
    )
    assert dev_present.strip() == "[]", dev_present
    (work / "s.toml").write_text(
        'name = "s"\njobs = ["bias-strength", "judge-history"]\n'
        '[[models]]\nprovider = "simulated"\nname = "sim"\n'
    )
    run = _sh(cli, "run", "s.toml", "--samples", "2", cwd=work, env=env)
    assert "results: runs/s/default/results.ndjson" in run
    analyze = _sh(cli, "analyze", "runs/s/default", cwd=work, env=env)
    assert "sunk-cost" in analyze and "judge history" in analyze  # a bias, and the judge's table
    report = _sh(cli, "report", "runs/s/default", cwd=work, env=env)
    assert (work / "runs/s/default/report/report.html").is_file(), report

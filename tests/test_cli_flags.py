"""The command-line conventions of the field (issue 33, item 7): `plan` and `run` take
--model PROVIDER/NAME (repeatable), --limit N and --output-dir; a flag wins over the config,
and the plan says where each value came from."""

from __future__ import annotations

import orjson

from tests.conftest import ROOT, cli, write_config

CONFIG = """
name = "flags"
jobs = ["paired"]
samples = 2
items = 3
output_dir = "{out}"
[[models]]
provider = "simulated"
name = "from-config"
"""


def _config(tmp_path):
    return write_config(tmp_path, CONFIG.format(out=tmp_path / "configured"))


def test_flags_win_over_the_config_and_the_plan_says_so(tmp_path):
    cfg = _config(tmp_path)
    plain = orjson.loads(cli("plan", str(cfg), "--json", cwd=tmp_path).stdout)
    assert plain["sources"] == {
        "models": "config",
        "samples": "config",
        "items": "config",
        "output_dir": "config",
        "run_id": "default",
    }
    done = cli(
        "plan",
        str(cfg),
        "--json",
        "--model",
        "simulated",
        "--model",
        "openai/gpt-4o-mini",
        "--limit",
        "1",
        "--output-dir",
        str(tmp_path / "elsewhere"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    flagged = orjson.loads(done.stdout)
    assert flagged["sources"] == {
        "models": "--model",
        "samples": "config",
        "items": "--limit",
        "output_dir": "--output-dir",
        "run_id": "default",
    }
    assert [m["label"] for m in flagged["models"]] == ["simulated/simulated", "openai/gpt-4o-mini"]
    table = cli("plan", str(cfg), "--limit", "1", cwd=tmp_path)
    assert "items 1 (--limit)" in " ".join(table.stdout.split())


def _items(plan: dict) -> list[int]:
    return [c["items"] for j in plan["jobs"] for e in j["experiments"] for c in e["conditions"]]


def test_limit_caps_the_items_of_each_experiment_and_condition(tmp_path):
    cfg = write_config(
        tmp_path,
        """
        name = "many"
        jobs = ["bias-strength"]
        samples = 1
        [[models]]
        provider = "simulated"
        name = "s"
        """,
    )
    whole = orjson.loads(cli("plan", str(cfg), "--json", cwd=tmp_path).stdout)
    capped = orjson.loads(cli("plan", str(cfg), "--json", "--limit", "2", cwd=tmp_path).stdout)
    assert max(_items(whole)) > 2 and max(_items(capped)) == 2
    assert [min(n, 2) for n in _items(whole)] == _items(capped)
    assert capped["total"]["tasks"] < whole["total"]["tasks"]


def test_run_writes_where_output_dir_says(tmp_path):
    cfg = _config(tmp_path)
    done = cli(
        "run", str(cfg), "--output-dir", str(tmp_path / "elsewhere"), "--limit", "1", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "elsewhere" / "flags" / "default" / "results.ndjson").is_file()
    assert not (tmp_path / "configured").exists()


def test_bad_flags_exit_2_naming_the_flag(tmp_path):
    cfg = _config(tmp_path)
    for args, said in (
        (["--model", "gpt-4o"], "option '--model': 'gpt-4o' names no model"),
        (["--model", "nosuch/x"], "option '--model': the 1st model given: unknown preset 'nosuch'"),
        (["--limit", "0"], "--limit"),
    ):
        done = cli("plan", str(cfg), *args, cwd=tmp_path)
        assert done.returncode == 2 and said in " ".join(done.stderr.split()), done.stderr


def test_a_run_folder_takes_no_flag_that_changes_its_plan(tmp_path):
    cfg = _config(tmp_path)
    assert cli("run", str(cfg), "--limit", "1", cwd=tmp_path).returncode == 0
    run_dir = tmp_path / "configured" / "flags" / "default"
    for args in (["--model", "simulated"], ["--limit", "2"], ["--output-dir", "x"]):
        done = cli("run", str(run_dir), *args, cwd=tmp_path)
        assert done.returncode == 2 and "cannot change a run that exists" in done.stderr


def test_model_flags_replace_the_configs_models_and_leave_its_limit_tables_be(tmp_path):
    """The demo config paces its local model under [limits.local]: with --model another
    provider, that table names no model, and is no error then (it is one in the config
    alone: a misnamed table would leave its models at the defaults)."""
    cfg = write_config(
        tmp_path,
        CONFIG.format(out=tmp_path / "configured") + "[limits.simulated]\nmax_in_flight = 2\n",
    )
    assert cli("plan", str(cfg), cwd=tmp_path).returncode == 0
    done = cli("plan", str(cfg), "--model", "openai/gpt-4o-mini", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [m["label"] for m in orjson.loads(done.stdout)["models"]] == ["openai/gpt-4o-mini"]
    demo = cli(
        "plan", "configs/demo.toml", "--model", "openai/gpt-4o-mini", "--limit", "2", cwd=ROOT
    )
    assert demo.returncode == 0, demo.stderr
    typo = write_config(
        tmp_path, CONFIG.format(out=tmp_path / "c") + "[limits.simulatd]\n", "t.toml"
    )
    wrong = cli("plan", str(typo), cwd=tmp_path)
    assert wrong.returncode == 2 and "limits.simulatd" in wrong.stderr

"""`--json` on status, analyze, history and compare (issue 33, item 6): one JSON document on
stdout, valid against its published schema, holding what the tables show."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import orjson
import pytest

from tests.conftest import ROOT, cli, run_quietly, write_config

SCHEMAS = ROOT / "docs" / "schemas"


def _check(doc: dict, name: str) -> None:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("json")
    for night, seed in (("n1", 1), ("n2", 2)):
        cfg = write_config(
            tmp,
            f"""
            name = "j"
            jobs = ["paired"]
            samples = 4
            seed = {seed}
            run_id = "{night}"
            output_dir = "{tmp / "runs"}"
            [[models]]
            provider = "simulated"
            name = "sim"
            temperature = 1.0
            [models.simulate]
            parse_error_rate = 0.25
            """,
        )
        run_quietly(cfg)
    return tmp / "runs" / "j"


def _json(*args: str, cwd: Path, code: int = 0) -> dict:
    done = cli(*args, "--json", cwd=cwd)
    assert done.returncode == code, done.stderr
    return orjson.loads(done.stdout)  # the whole of stdout is the document


def test_status_json(nights):
    doc = _json("status", str(nights / "n1"), cwd=nights)
    _check(doc, "status")
    recs = [orjson.loads(x) for x in (nights / "n1" / "results.ndjson").read_bytes().splitlines()]
    (model,) = doc["models"]
    assert model["tasks"] == len(recs) and doc["complete"] and doc["pending"] == 0
    assert model["parse_error"] == sum(r["status"] == "parse_error" for r in recs) > 0
    assert model["ok"] == sum(r["status"] == "ok" for r in recs)


def test_analyze_json(nights):
    doc = _json("analyze", str(nights / "n1"), cwd=nights)
    _check(doc, "analyze")
    written = orjson.loads(Path(doc["written"]["summary.json"]).read_bytes())
    rows = doc["tables"]["summary"]
    assert len(rows) == 6  # the six experiments
    assert {r["experimentSlug"] for r in rows} == {r["experimentSlug"] for r in written["effects"]}


def test_history_json(nights):
    doc = _json("history", str(nights), cwd=nights)
    _check(doc, "history")
    assert [Path(r["run"]).name for r in doc["runs"]] == ["n1", "n2"]
    assert all(r["status"] == "complete" and r["done"] == r["tasks"] for r in doc["runs"])


def test_compare_json_is_the_file_it_writes(nights):
    done = cli("compare", str(nights / "n1"), str(nights / "n2"), "--json", cwd=nights)
    assert done.returncode in (0, 1), done.stderr
    doc = orjson.loads(done.stdout)
    _check(doc, "compare")
    (written,) = (nights / "compare").glob("*.json")
    assert doc == orjson.loads(written.read_bytes())
    assert doc["exit_code"] == done.returncode


def test_a_bad_run_folder_is_an_error_on_stderr_not_json(tmp_path):
    done = cli("status", str(tmp_path), "--json", cwd=tmp_path)
    assert done.returncode == 2 and not done.stdout.strip() and "error" in done.stderr


def test_compare_json_with_a_hook_keeps_stdout_one_document(nights, tmp_path):
    import shutil

    from tests.conftest import cli_process

    cut = tmp_path / "n2-cut"  # a night cut short: flagged incomplete, so the hook runs
    shutil.copytree(nights / "n2", cut, ignore=shutil.ignore_patterns("results.snapshot"))
    lines = (cut / "results.ndjson").read_bytes().splitlines(keepends=True)
    (cut / "results.ndjson").write_bytes(b"".join(lines[: len(lines) // 2]))
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/sh\necho the hook ran\n")
    hook.chmod(0o755)
    done = cli_process(
        "compare",
        str(nights / "n1"),
        str(cut),
        "--json",
        "--out",
        str(tmp_path / "compare"),
        "--fail-on",
        "all",
        "--on-change",
        str(hook),
        cwd=nights,
    )
    assert done.returncode == 1, done.stderr
    orjson.loads(done.stdout)  # nothing but the document
    assert "the hook ran" in done.stderr

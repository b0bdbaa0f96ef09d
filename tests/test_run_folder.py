"""A run folder that is not what the verbs expect (a manifest of the wrong shape, a results
file that is a folder, a file where the folder should be): exit 2 naming the file, the field
and the fix, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.conftest import run_quietly, write_config

VERBS = ("run", "status", "analyze", "report", "export", "repair")


def _run(tmp_path: Path) -> tuple[Path, Path]:
    cfg = write_config(
        tmp_path,
        f"""
        name = "f"
        jobs = ["paired"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        """,
    )
    return cfg, run_quietly(cfg).run_dir


def _invoke(verb: str, cfg: Path, target: Path):
    result = CliRunner().invoke(app, [verb, str(cfg if verb == "run" else target)])
    message = result.stderr if hasattr(result, "stderr") else result.output
    return result, message, " ".join(result.output.split())


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
        if p.name != ".lock"
    }


def _manifest_without(key: str):
    def change(m: dict) -> bytes:
        m.pop(key)
        return orjson.dumps(m)

    return change


MANIFESTS = {  # how the manifest is broken -> (new bytes, what the message must name)
    "a JSON list": (lambda m: b"[1, 2]", "it holds a JSON list, not an object"),
    "no plan": (
        _manifest_without("plan"),
        "field 'plan': manifest.json is not a run manifest: it is missing",
    ),
    "plan a list": (lambda m: orjson.dumps({**m, "plan": []}), "field 'plan'"),
    "per_model a string": (
        lambda m: orjson.dumps({**m, "plan": {**m["plan"], "per_model": "x"}}),
        "field 'plan.per_model': manifest.json is not a run manifest: it should be an object",
    ),
    "a count not a number": (
        lambda m: orjson.dumps({**m, "plan": {**m["plan"], "per_model": {"k": "3"}}}),
        "field 'plan.per_model.k'",
    ),
    "a UTF-8 BOM": (lambda m: b"\xef\xbb\xbf" + orjson.dumps(m), "UTF-8 byte-order mark (BOM)"),
}


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("case", MANIFESTS)
def test_a_manifest_of_the_wrong_shape_is_named(tmp_path, verb, case):
    cfg, run_dir = _run(tmp_path)
    change, expected = MANIFESTS[case]
    manifest = run_dir / "manifest.json"
    manifest.write_bytes(change(orjson.loads(manifest.read_bytes())))
    before = _snapshot(tmp_path)
    result, message, flat = _invoke(verb, cfg, run_dir)
    assert result.exit_code == 2, result.output
    assert str(manifest) in flat and expected in flat and "fix:" in flat
    assert "Traceback" not in message
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("verb", VERBS)
def test_a_results_file_that_is_a_folder_is_named(tmp_path, verb):
    cfg, run_dir = _run(tmp_path)
    results = run_dir / "results.ndjson"
    results.unlink()
    results.mkdir()
    before = _snapshot(tmp_path)
    result, message, flat = _invoke(verb, cfg, run_dir)
    assert result.exit_code == 2, result.output
    assert f"{results}: results.ndjson is a folder" in flat and "fix: move it out of" in flat
    assert "Traceback" not in message
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("verb", VERBS)
def test_a_file_where_the_run_folder_should_be_is_named(tmp_path, verb):
    cfg, run_dir = _run(tmp_path)
    (tmp_path / "runs" / "f" / "elsewhere").mkdir()
    for p in run_dir.iterdir():
        p.rename(tmp_path / "runs" / "f" / "elsewhere" / p.name)
    run_dir.rmdir()
    run_dir.write_text("not a folder")  # e.g. a results file passed instead of its folder
    before = _snapshot(tmp_path)
    result, message, flat = _invoke(verb, cfg, run_dir)
    assert result.exit_code == 2, result.output
    if verb == "run":  # the config's output_dir check finds it first
        assert (
            f"field 'output_dir': cannot create the run folder {run_dir}" in flat
            and "is a file" in flat
        )
    else:
        assert f"{run_dir}: this is a file, not a run folder" in flat
    assert "fix:" in flat and "Traceback" not in message
    assert _snapshot(tmp_path) == before

"""What wrote a run and an export: a format version on every results record and manifest, and
export.toml beside exported files; a run of a newer format is refused with a clear message, not
misread."""

from __future__ import annotations

import tomllib

import orjson
from typer.testing import CliRunner

from orchestrator import __version__
from orchestrator.cli import app
from orchestrator.formats import EXPORT_FORMAT, RUN_FORMAT
from tests.test_run_folder import _run as simulated_run


def _run(tmp_path):
    return simulated_run(tmp_path)[1]


def test_records_and_manifest_carry_the_run_format(tmp_path):
    run_dir = _run(tmp_path)
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["formatVersion"] == RUN_FORMAT == 1
    assert manifest["software"] == __version__
    lines = (run_dir / "results.ndjson").read_bytes().splitlines()
    assert lines and all(orjson.loads(line)["formatVersion"] == RUN_FORMAT for line in lines)
    assert all(line.startswith(b'{"taskId":"') for line in lines)  # the scan's cheap head


def test_a_run_of_a_newer_format_is_refused_by_name(tmp_path):
    run_dir = _run(tmp_path)
    path = run_dir / "manifest.json"
    manifest = orjson.loads(path.read_bytes())
    path.write_bytes(orjson.dumps(manifest | {"formatVersion": 2, "software": "9.0.0"}))
    for verb in ("status", "analyze", "export"):
        done = CliRunner().invoke(app, [verb, str(run_dir)])
        assert done.exit_code == 2, (verb, done.output)
        flat = " ".join(done.output.split())
        assert "run format 2" in flat and "9.0.0" in flat and "formatVersion" in flat, flat
    assert not (run_dir / "export").exists()


def test_a_run_from_before_the_field_reads_as_format_1(tmp_path):
    run_dir = _run(tmp_path)
    path = run_dir / "manifest.json"
    manifest = orjson.loads(path.read_bytes())
    del manifest["formatVersion"]
    path.write_bytes(orjson.dumps(manifest))
    assert CliRunner().invoke(app, ["status", str(run_dir)]).exit_code == 0


def test_an_export_says_what_wrote_it_beside_the_files_it_wrote(tmp_path):
    run_dir = _run(tmp_path)
    done = CliRunner().invoke(app, ["export", str(run_dir), "--format", "ai-benchmark"])
    assert done.exit_code == 0, done.output
    folder = run_dir / "export" / "ai-benchmark"
    exported = sorted(p for p in folder.iterdir() if p.name != "export.toml")
    assert exported and all(p.suffix == ".ndjson" for p in exported)  # as a scorer globs them
    info = tomllib.loads((folder / "export.toml").read_text(encoding="utf-8"))
    assert info["format"] == "ai-benchmark" and info["formatVersion"] == EXPORT_FORMAT
    assert info["software"] == __version__ and info["run_software"] == __version__
    assert info["run"] == str(run_dir.resolve())
    assert set(info["records"]) == {p.name for p in exported}
    for p in exported:
        assert info["records"][p.name] == len(p.read_bytes().splitlines())

"""status and export read a task's final record without holding the records: its first
terminal one, or else its last failed one; lines in any order, duplicates, superseded failures."""

from __future__ import annotations

import random

import orjson
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.conftest import run_quietly, write_config


def _run(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "s"
        jobs = ["paired"]
        samples = 3
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        [models.simulate]
        parse_error_rate = 0.3
        """,
    )
    run_dir = run_quietly(cfg).run_dir
    return run_dir, [
        orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()
    ]


def _write(run_dir, records):
    (run_dir / "results.ndjson").write_bytes(
        b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records)
    )


def _row(output: str) -> list[str]:
    row = next(line for line in output.splitlines() if "simulated/m" in line)
    return [cell.strip() for cell in row.split("│")[2:-1]]


def test_status_counts_each_task_by_its_final_record(tmp_path):
    run_dir, recs = _run(tmp_path)
    a, b, c = recs[0], recs[1], recs[2]
    failed = lambda rec, attempts, cost: {
        **rec,
        "status": "failed",
        "response": {},  # noqa: E731
        "attempts": attempts,
        "costUsd": cost,
    }
    lines = [
        failed(a, 3, 0.25),
        *recs[:1],
        failed(b, 2, 0.1),
        failed(b, 4, 0.2),
        *recs[2:],
        {**c, "costUsd": 9.0, "attempts": 5},
    ]  # a before its success, b failed twice, c twice
    _write(run_dir, lines)
    result = CliRunner().invoke(app, ["status", str(run_dir)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    finished = [r for r in recs if r is not b]
    ok = sum(r["status"] == "ok" for r in finished)
    parse_errors = sum(r["status"] == "parse_error" for r in finished)
    assert 0 < parse_errors < len(finished)
    # tasks, ok, parse_error, refused, too_long, failed, pending, retries, spend: tasks by their
    # final records, retries and spend by every line (each attempt was paid for)
    assert _row(result.output) == [
        f"{len(recs)}",
        f"{ok}",
        f"{parse_errors}",
        "0",
        "0",
        "1",
        "1",
        "10",
        "9.5500",
    ]
    assert "1 tasks pending" in result.output and "spent $9.5500" in result.output


def _stable(path) -> bytes:
    """A file's bytes, but export.toml's `created_at`: two exports a second apart differ there."""
    lines = path.read_bytes().splitlines(keepends=True)
    return b"".join(line for line in lines if not line.startswith(b"created_at = "))


def test_export_of_a_disordered_file_is_the_export_of_the_clean_one(tmp_path):
    run_dir, recs = _run(tmp_path)
    clean = CliRunner().invoke(app, ["export", str(run_dir), "--out", str(tmp_path / "clean")])
    assert clean.exit_code == 0, clean.output
    rng = random.Random(4)
    noisy = [*recs, *rng.sample(recs, 8)]  # second terminal copies of some tasks
    noisy += [{**r, "status": "failed", "response": {}} for r in rng.sample(recs, 8)]
    rng.shuffle(noisy)
    _write(run_dir, noisy)
    again = CliRunner().invoke(app, ["export", str(run_dir), "--out", str(tmp_path / "noisy")])
    assert again.exit_code == 0, again.output
    files = sorted(p.name for p in (tmp_path / "clean").iterdir())
    assert files and files == sorted(p.name for p in (tmp_path / "noisy").iterdir())
    for name in files:
        assert _stable(tmp_path / "noisy" / name) == _stable(tmp_path / "clean" / name)

"""results.ndjson hygiene: a line that is not a record stops every verb with its line number and
the fix, changing nothing; `repair` moves such lines aside; a torn last line is skipped by the
readers (and said so) and cut by `run`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.engine import repair as repair_module
from orchestrator.engine.repair import repair_results
from orchestrator.engine.results import ResultLines
from orchestrator.engine.snapshot import parse_checked
from tests.conftest import run_quietly, write_config

VERBS = ("run", "status", "analyze", "report", "export")


def _simulated_run(tmp_path: Path, samples: int = 2) -> tuple[Path, Path]:
    cfg = write_config(
        tmp_path,
        f"""
        name = "h"
        jobs = ["paired"]
        samples = {samples}
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        [models.simulate]
        parse_error_rate = 0.2
        """,
    )
    outcome = run_quietly(cfg)
    assert outcome.exit_code == 0
    return cfg, outcome.run_dir


def _invoke(verb: str, cfg: Path, run_dir: Path):
    result = CliRunner().invoke(app, [verb, str(cfg if verb == "run" else run_dir)])
    message = result.stderr if hasattr(result, "stderr") else result.output
    return result, message, " ".join(result.output.split())


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under a run folder (the run lock's file aside), to prove nothing changed."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def _glued(lines: list[bytes]) -> bytes:
    """What two writers at once could leave: a record cut short, the next one glued to it."""
    return lines[0][:150] + lines[1]


BAD_LINES = {
    "blank": lambda lines: b"\n",
    "garbage": lambda lines: b"this is not json\n",
    "foreign JSON": lambda lines: b'{"event": "checkpoint", "at": 3}\n',
    "a JSON array": lambda lines: b"[1, 2, 3]\n",
    "record without a newline, then another": _glued,
}
WHY = {
    "blank": "a blank line",
    "garbage": "not JSON",
    "foreign JSON": "JSON without taskId and status",
    "a JSON array": "not an object",
    "record without a newline, then another": "not JSON",
}
# Every verb, `run` included, names each kind (run's fast check also catches a glued line:
# issue 32, item 7).
CASES = [(verb, kind) for verb in VERBS for kind in BAD_LINES]


@pytest.mark.parametrize(("verb", "kind"), CASES)
def test_a_bad_line_anywhere_stops_every_verb_naming_it_and_changes_nothing(tmp_path, verb, kind):
    cfg, run_dir = _simulated_run(tmp_path)
    results = run_dir / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:5]) + BAD_LINES[kind](lines) + b"".join(lines[5:]))
    before = _snapshot(run_dir)
    result, message, flat = _invoke(verb, cfg, run_dir)
    assert result.exit_code == 2, result.output
    assert str(results) in flat and "line 6 (" in flat and WHY[kind] in flat
    assert f"orchestrator repair {run_dir}" in flat and "results.rejected.ndjson" in flat
    assert "Traceback" not in message
    assert _snapshot(run_dir) == before


def test_all_bad_lines_are_counted_and_the_first_ones_named(tmp_path):
    _, run_dir = _simulated_run(tmp_path)
    results = run_dir / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"\n".join(lines) + b"\n")  # a blank line after every record
    result, _, flat = _invoke("status", Path(), run_dir)
    assert result.exit_code == 2
    assert "line 2 (a blank line), line 4 (a blank line)" in flat
    assert f"and {len(lines) - 5} more are not result records ({len(lines)} lines)" in flat


def test_run_refuses_a_bad_line_before_it_cuts_a_torn_last_one(tmp_path):
    cfg, run_dir = _simulated_run(tmp_path)
    results = run_dir / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:3]) + b"oops\n" + b"".join(lines[3:-1]) + lines[-1][:40])
    before = results.read_bytes()
    result, _, flat = _invoke("run", cfg, run_dir)
    assert result.exit_code == 2 and "line 4 (not JSON" in flat
    assert results.read_bytes() == before


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["status", "analyze", "report", "export"])
def test_readers_skip_a_torn_last_line_say_so_and_leave_it(tmp_path, verb):
    _, run_dir = _simulated_run(tmp_path)
    results = run_dir / "results.ndjson"
    complete = results.read_bytes()
    clean = tmp_path / "clean"
    clean.mkdir()
    for name in ("manifest.json", "results.ndjson"):
        (clean / name).write_bytes((run_dir / name).read_bytes())
    torn = complete + complete.splitlines(keepends=True)[0][:40]  # a write cut short
    results.write_bytes(torn)
    result, _, flat = _invoke(verb, Path(), run_dir)
    assert result.exit_code == 0, result.output
    assert "ignored a torn last line" in flat and "(40 bytes, no newline" in flat
    assert results.read_bytes() == torn  # a reader never changes the file
    expected, _, expected_flat = _invoke(verb, Path(), clean)
    assert expected.exit_code == 0 and "ignored a torn" not in expected_flat
    outputs = {
        "analyze": "summary.csv",
        "report": "report/report.md",
        "export": "export/ai-benchmark",
    }
    if verb == "status":  # the same figures as without the torn line
        assert flat.split(" complete;")[0].replace(str(run_dir), "") == expected_flat.split(
            " complete;"
        )[0].replace(str(clean), "")
    elif verb == "export":

        def exported(folder: Path) -> list[bytes]:  # export.toml names the run and the time
            files = sorted((folder / outputs[verb]).iterdir())
            return [
                re.sub(rb"(?m)^(run|created_at) = .*$", b"", p.read_bytes())
                if p.name == "export.toml"
                else p.read_bytes()
                for p in files
            ]

        assert [p.name for p in sorted((run_dir / outputs[verb]).iterdir())] == [
            p.name for p in sorted((clean / outputs[verb]).iterdir())
        ]
        assert exported(run_dir) == exported(clean)
    else:
        same = (run_dir / outputs[verb]).read_text().replace(str(run_dir), "")
        assert same == (clean / outputs[verb]).read_text().replace(str(clean), "")


def test_repair_moves_bad_lines_aside_and_the_run_goes_on(tmp_path):
    cfg, run_dir = _simulated_run(tmp_path)
    results, rejected = run_dir / "results.ndjson", run_dir / "results.rejected.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    rejected.write_bytes(b"from an earlier repair\n")
    glued = _glued(lines[10:12])
    bad = [b"\n", b"not json\n", b'{"event": "checkpoint"}\n', glued]
    mixed = [
        *lines[:2],
        bad[0],
        *lines[2:4],
        bad[1],
        *lines[4:6],
        bad[2],
        *lines[6:10],
        bad[3],
        *lines[12:-1],
        lines[-1][:50],
    ]
    results.write_bytes(b"".join(mixed))
    result = CliRunner().invoke(app, ["repair", str(run_dir)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert f"moved 5 line(s) to {rejected}" in flat
    assert "line 3: a blank line" in flat and "line 6: not JSON" in flat
    assert "line 9: JSON without taskId and status" in flat and "line 14: not JSON" in flat
    assert f"line {len(mixed)}: a torn last line" in flat
    kept = [*lines[:10], *lines[12:-1]]
    assert results.read_bytes() == b"".join(kept)  # records untouched, in their order
    assert (
        rejected.read_bytes()
        == b"from an earlier repair\n" + b"".join(bad) + lines[-1][:50] + b"\n"
    )
    assert not list(run_dir.glob("*.tmp"))
    again = CliRunner().invoke(app, ["repair", str(run_dir)])
    assert again.exit_code == 0 and "nothing to repair" in again.output
    assert run_quietly(cfg).exit_code == 0  # the tasks whose lines were moved run again
    final = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    assert sorted(r["taskId"] for r in final) == sorted(
        {orjson.loads(line)["taskId"] for line in lines}
    )
    assert CliRunner().invoke(app, ["analyze", str(run_dir)]).exit_code == 0


def test_a_repair_that_fails_midway_leaves_the_results_as_they_were(tmp_path, monkeypatch):
    _, run_dir = _simulated_run(tmp_path)
    results = run_dir / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    broken = b"".join(lines[:3]) + b"garbage\n" + b"".join(lines[3:])
    results.write_bytes(broken)

    def crash(*args):
        raise OSError("disk gone")

    monkeypatch.setattr(repair_module.os, "replace", crash)
    with pytest.raises(OSError):
        repair_results(results)
    assert results.read_bytes() == broken
    assert (run_dir / "results.rejected.ndjson").read_bytes() == b"garbage\n"  # kept, not lost
    monkeypatch.undo()
    assert repair_results(results).moved_count == 1
    assert results.read_bytes() == b"".join(lines)
    assert os.listdir(run_dir).count("results.ndjson.repair.tmp") == 0


def test_a_line_torn_by_a_run_while_it_is_read_is_left_out(tmp_path):
    _, run_dir = _simulated_run(tmp_path)
    results = run_dir / "results.ndjson"
    complete = results.read_bytes()
    lines = ResultLines(results).scan()
    read_from = []

    def read(path: Path):
        if not read_from:  # a run flushes half a line between the check and the parse
            with open(results, "ab") as f:
                f.write(complete[:60])
        read_from.append(path)
        return pl.scan_ndjson(path, schema={"taskId": pl.String}).collect()

    df = parse_checked(lines, read)
    assert df.height == complete.count(b"\n") == lines.lines
    assert read_from[0] == results and read_from[1] != results  # then a snapshot was read
    assert results.read_bytes() == complete + complete[:60]


def test_repair_is_refused_while_a_run_holds_the_folder(tmp_path):
    from orchestrator.engine.lock import RunLock

    _, run_dir = _simulated_run(tmp_path)
    results = run_dir / "results.ndjson"
    results.write_bytes(results.read_bytes() + b"not json\n")
    before = _snapshot(run_dir)
    with RunLock(run_dir) as holder:
        holder.acquire()
        result = CliRunner().invoke(app, ["repair", str(run_dir)])
    assert result.exit_code == 2 and f"pid {os.getpid()}" in result.output
    assert _snapshot(run_dir) == before


def test_the_resume_scan_reads_what_the_general_reader_reads(tmp_path):
    """ResultLines.finished (resume's one loop) and records() apply one check: on a file with
    failed attempts, records in another key order (parsed in full) and a torn last line, they
    find the same tasks and the same bytes."""
    _, run_dir = _simulated_run(tmp_path, samples=4)
    results = run_dir / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    failed = orjson.loads(lines[0]) | {"status": "failed"}
    reordered = dict(reversed(list(orjson.loads(lines[1]).items())))  # parsed, not by position
    tail = orjson.dumps(orjson.loads(lines[2]) | {"taskId": "f" * 32})[:90]  # torn
    retried = orjson.loads(lines[3]) | {"taskId": "e" * 32, "status": "failed"}
    retried["response"]["scores"] = [{"option": "1", "logp": -1.0, "premise": -1.0, "pmi": 0.0}]
    body = [orjson.dumps(failed) + b"\n", *lines[:1], orjson.dumps(reordered) + b"\n", *lines[2:]]
    results.write_bytes(b"".join(body) + orjson.dumps(retried) + b"\n" + tail)

    general = ResultLines(results)
    rows = list(general.records())
    resume = ResultLines(results)
    model = rows[0][2]
    done, by_model, kept = resume.finished({model})
    assert done == {t for t, status, *_ in rows if status != "failed"}
    assert sum(by_model.values()) == len(done) == len(lines)
    assert set(kept) == {"e" * 32}  # the failed attempt of a task that never finished
    seen = (general.lines, general.complete_bytes, general.torn_bytes)
    assert seen == (resume.lines, resume.complete_bytes, resume.torn_bytes)
    assert resume.torn_bytes == 90 and resume.lines == len(lines) + 2


def test_the_resume_scan_names_the_lines_the_general_reader_names(tmp_path):
    _, run_dir = _simulated_run(tmp_path, samples=4)
    results = run_dir / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    bad = [b"\n", _glued(lines[4:6]), b"not json\n"]
    results.write_bytes(b"".join(lines[:3] + bad[:2] + lines[3:9] + bad[2:] + lines[9:]))
    general, resume = ResultLines(results), ResultLines(results)
    list(general.records())
    resume.finished()
    not_json = "not JSON (garbage, or parts of two lines)"
    assert general.bad == resume.bad == [(4, "a blank line"), (5, not_json), (12, not_json)]
    assert general.bad_count == resume.bad_count == 3

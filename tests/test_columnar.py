"""The columnar snapshot beside results.ndjson (engine/columnar.py): brought up to date from the
bytes appended since it was written, rebuilt when the log it covers changed, never an error
when it cannot be written, and never a row lost or counted twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import polars as pl
import pytest

from orchestrator.engine import columnar
from orchestrator.engine.columnar import FOLDER, META, records
from orchestrator.engine.status import tally
from tests.conftest import ROOT, run_quietly, write_config


def _run(tmp_path: Path, samples: int = 20) -> Path:
    cfg = write_config(
        tmp_path,
        f"""
        name = "c"
        jobs = ["paired"]
        samples = {samples}
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        temperature = 1.0
        [models.simulate]
        parse_error_rate = 0.1
        """,
    )
    return run_quietly(cfg).run_dir / "results.ndjson"


def _truth(path: Path) -> list[dict]:
    """Every record, parsed line by line: the reference the snapshot is checked against."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _meta(path: Path) -> dict:
    return orjson.loads((path.parent / FOLDER / META).read_bytes())


def _same(found, path: Path) -> None:
    truth = _truth(path)
    df = found.frame.collect()
    assert df.height == len(truth) == found.lines
    assert df["taskId"].to_list() == [r["taskId"] for r in truth]  # file order, each once
    assert df["status"].to_list() == [r["status"] for r in truth]
    starts = [0]
    for line in path.read_bytes().splitlines(keepends=True)[:-1]:
        starts.append(starts[-1] + len(line))
    assert df["offset"].to_list() == starts


def test_the_first_read_writes_it_and_the_next_parses_only_what_was_appended(tmp_path, monkeypatch):
    path = _run(tmp_path)
    _same(records(path), path)
    meta = _meta(path)
    assert meta["offset"] == path.stat().st_size and len(meta["parts"]) == 1

    parsed = []
    monkeypatch.setattr(columnar, "_parse", lambda p: parsed.append(p))  # no full parse now
    _same(records(path), path)
    assert not parsed

    lines = path.read_bytes().splitlines(keepends=True)
    extra = [orjson.loads(line) | {"taskId": f"{i:032x}"} for i, line in enumerate(lines[:30])]
    with open(path, "ab") as f:  # another run's records, as a resume appends them
        f.writelines(orjson.dumps(r) + b"\n" for r in extra)
    monkeypatch.setattr(columnar, "PART_LINES", 10)
    _same(records(path), path)  # read from the old part and the 30 new lines only
    assert not parsed
    meta = _meta(path)
    assert meta["offset"] == path.stat().st_size and len(meta["parts"]) == 2


def test_fewer_new_lines_than_a_part_are_read_but_not_written(tmp_path):
    path = _run(tmp_path)
    records(path)
    before = _meta(path)
    with open(path, "ab") as f:
        f.write(path.read_bytes().splitlines(keepends=True)[0])
    _same(records(path), path)
    assert _meta(path) == before


@pytest.mark.parametrize("change", ["repaired", "replaced", "cut"])
def test_a_log_changed_under_it_rebuilds_it(tmp_path, change):
    path = _run(tmp_path)
    records(path)
    lines = path.read_bytes().splitlines(keepends=True)
    if change == "repaired":  # a line moved aside: the same file, shorter, bytes shifted
        path.write_bytes(b"".join(lines[:5] + lines[6:]))
    elif change == "replaced":  # same size, other content
        swapped = lines[1].replace(b'"status":"ok"', b'"status":"no"')
        path.write_bytes(b"".join([lines[0], swapped, *lines[2:]]))
    else:
        path.write_bytes(b"".join(lines[:3]))
    found = records(path)
    _same(found, path)
    assert _meta(path)["offset"] == path.stat().st_size


def test_a_snapshot_that_cannot_be_written_is_no_error(tmp_path, monkeypatch):
    path = _run(tmp_path)
    folder = path.parent / FOLDER

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(folder))

    monkeypatch.setattr(columnar, "folder_within", refuse)  # as a read-only folder answers
    _same(records(path), path)
    assert not folder.exists()
    counts, paid, _ = tally(path)
    assert sum(counts.values()) == len({r["taskId"] for r in _truth(path)})


def test_a_damaged_snapshot_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setattr(columnar, "GRACE_S", 0.0)
    path = _run(tmp_path)
    records(path)
    folder = path.parent / FOLDER
    (folder / META).write_bytes(b'{"format": 1, "offs')  # torn
    _same(records(path), path)
    part = folder / _meta(path)["parts"][0]["name"]
    part.unlink()  # a part gone
    _same(records(path), path)
    (folder / _meta(path)["parts"][0]["name"]).write_bytes(b"not parquet")  # a part garbled
    (folder / ".part-0123456789ab.parquet.tmp").write_bytes(b"half")  # a write cut short
    _same(records(path), path)
    assert [p.name for p in folder.iterdir() if p.name != META] == [
        p["name"] for p in _meta(path)["parts"]
    ]


def test_a_reader_keeps_the_parts_it_took_while_another_rebuilds(tmp_path):
    path = _run(tmp_path)
    first = records(path)  # a reader holding the snapshot's parts, lazily
    copy = path.with_name("copy.ndjson")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)  # a replaced log (as repair replaces it): another inode
    second = records(path)
    assert _meta(path)["identity"][1] == path.stat().st_ino
    _same(second, path)
    assert first.frame.collect().height == second.lines  # its parts were not deleted under it


def test_lines_appended_while_it_is_read_are_counted_once(tmp_path, monkeypatch):
    path = _run(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    real = columnar._parse
    appended = []

    def parse_while_a_run_appends(p):
        if not appended:  # a run appends during the (first) parse, its last line torn
            appended.append(True)
            with open(path, "ab") as f:
                f.writelines(lines[:7])
                f.write(lines[7][:40])
        return real(p)

    monkeypatch.setattr(columnar, "_parse", parse_while_a_run_appends)
    first = records(path)
    monkeypatch.setattr(columnar, "_parse", real)
    covered = first.frame.collect()
    assert covered.height == first.lines and first.lines >= len(lines)
    with open(path, "ab") as f:
        f.write(lines[7][40:])  # the run finishes its line
    second = records(path)
    _same(second, path)
    assert second.lines == len(lines) + 8


@pytest.mark.slow
def test_kill_9_while_it_is_written_leaves_a_usable_run(tmp_path):
    """kill -9 of `status` at moments spread over its snapshot's writing: every later read
    counts every record once."""
    path = _run(tmp_path, samples=2000)  # 24,000 records
    truth = _truth(path)
    for delay in (0.2, 0.5, 0.8, 1.1, 1.4):
        for stale in (path.parent / FOLDER).glob("*"):
            stale.unlink()
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "status", str(path.parent)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        found = records(path)
        df = found.frame.collect()
        assert df.height == len(truth) and df["taskId"].to_list() == [r["taskId"] for r in truth]


def test_status_and_analysis_read_it_as_they_read_the_log(tmp_path):
    path = _run(tmp_path)
    truth = _truth(path)
    by_status = pl.DataFrame(truth).group_by("status").len()
    counts, _, _ = tally(path)  # builds it
    again, _, _ = tally(path)  # reads it
    assert counts == again
    expected = dict(by_status.iter_rows())
    assert {s: n for (_, s), n in counts.items()} == expected


def _hashed(monkeypatch) -> list[int]:
    """The bytes each whole-prefix hash reads, as they happen."""
    from orchestrator.engine import prefix

    read: list[int] = []
    whole = prefix.prefix_hash

    def counted(path, nbytes):
        read.append(nbytes)
        return whole(path, nbytes)

    monkeypatch.setattr(prefix, "prefix_hash", counted)
    monkeypatch.setattr(columnar, "prefix_hash", counted)
    return read


def test_a_live_viewers_next_read_hashes_only_what_was_appended(tmp_path, monkeypatch):
    path = _run(tmp_path, samples=40)
    records(path, again=True)
    read = _hashed(monkeypatch)
    monkeypatch.setattr(columnar, "PART_LINES", 10)
    lines = path.read_bytes().splitlines(keepends=True)
    for round_ in range(3):  # a run appending between the viewer's reads
        extra = [
            orjson.loads(line) | {"taskId": f"{round_}{i:031x}"}
            for i, line in enumerate(lines[:12])
        ]
        with open(path, "ab") as f:
            f.writelines(orjson.dumps(r) + b"\n" for r in extra)
        _same(records(path, again=True), path)
    assert read == []  # never the whole prefix again
    assert _meta(path)["offset"] == path.stat().st_size
    _same(records(path), path)  # a command hashes the whole prefix, as ever
    assert read == [path.stat().st_size]


@pytest.mark.parametrize("where", ["start", "end"])
def test_a_live_viewer_sees_the_log_rewritten_at_either_end(tmp_path, monkeypatch, where):
    """Rewritten in place (the same file, the same size), at its start or its end: the next
    read of the same process rebuilds the snapshot from the log as it is now."""
    path = _run(tmp_path, samples=40)
    records(path, again=True)
    assert path.stat().st_size > 2 * (1 << 16)  # the two ends are apart
    lines = path.read_bytes().splitlines(keepends=True)
    ok = [i for i, line in enumerate(lines) if b'"status":"ok"' in line]
    at = ok[0] if where == "start" else ok[-1]
    assert _meta(path)["offset"] == path.stat().st_size  # every line is in the prefix
    lines[at] = lines[at].replace(b'"status":"ok"', b'"status":"no"')
    with open(path, "r+b") as f:  # in place: the identity stays
        f.write(b"".join(lines))
    found = records(path, again=True)
    _same(found, path)
    assert found.frame.collect()["status"][at] == "no"

"""`make bench` part (issue 33, item 2): the readers of a 1,000,008-record run, each as a user runs
it (a fresh `orchestrator` process, timed from its start), with the code of BASELINE (before the
columnar snapshot: every verb parsed the whole NDJSON log) beside today's, in one run:

- `status`, `analyze` and `compare` of two such nights: the whole process;
- `view`: from the process's start to the first page of answers over loopback, and its peak RSS.

Today's code is measured twice: the first read (no snapshot yet: it parses the log and writes
the snapshot) and the next (the snapshot is current: nothing is parsed).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.conftest import ROOT

BASELINE = "5889cf9"  # main before the snapshot
TARGETS = {"status": 1.0, "analyze": 3.0, "view": 3.0, "compare": 6.0}
VIEW_RSS_MB = 500


def _code_at(commit: str, into: Path) -> Path | None:
    """The package as it was at `commit` (a detached worktree), or None outside a git clone."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), commit],
        capture_output=True,
        text=True,
    )
    return into if done.returncode == 0 else None


def _timed(args: list[str], code: Path) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of `orchestrator ARGS` run with the package at `code`."""
    wrapper = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
        "assert done.returncode < 2, done; "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(code), "COLUMNS": "200"},
        cwd=code,
    ).stdout.split()
    return float(out[0]), float(out[1]) / 1024


def _view(run: Path, code: Path) -> tuple[float, float]:
    """Seconds from `orchestrator view`'s start to its first page of answers, and its peak RSS."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "view", str(run), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(code), "BROWSER": "true"},
        cwd=code,
    )
    try:
        while True:
            try:
                url = f"http://127.0.0.1:{port}/api/answers"
                with urllib.request.urlopen(url, timeout=600) as resp:
                    resp.read()
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("view ended before it answered") from None
                time.sleep(0.02)
        seconds = time.perf_counter() - t0
        with open(f"/proc/{proc.pid}/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
        return seconds, hwm / 1024
    finally:
        proc.terminate()
        proc.wait()


def _measure(nights: Path, code: Path) -> dict[str, tuple[float, float]]:
    a, b = nights / "n1", nights / "n2"
    out = Path(tempfile.mkdtemp())
    try:
        return {
            "status": _timed(["status", str(a)], code),
            "analyze": _timed(["analyze", str(a)], code),
            "view": _view(a, code),
            "compare": _timed(["compare", str(a), str(b), "--out", str(out / "compare")], code),
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _refresh(run: Path, appended: int = 1_000) -> str:
    """The viewer's next read of a live run after `appended` more lines, in one process, beside
    its first read and the whole-prefix hash each next read used to take."""
    from orchestrator.engine.prefix import prefix_hash
    from orchestrator.viewer.data import RunData

    data = RunData.open(run)
    t0 = time.perf_counter()
    data.loaded()
    first = time.perf_counter() - t0
    log = run / "results.ndjson"
    with open(log, "rb") as f:
        f.seek(-1 << 20, os.SEEK_END)
        tail = f.read().splitlines(keepends=True)[-appended:]
    with open(log, "ab") as f:  # a run going on: new tasks' records
        f.writelines(line.replace(b'"taskId":"', b'"taskId":"f', 1) for line in tail)
    data._next_load = 0.0
    t0 = time.perf_counter()
    frame = data.loaded().frame
    refresh = time.perf_counter() - t0
    t0 = time.perf_counter()
    prefix_hash(log, log.stat().st_size)
    whole = time.perf_counter() - t0
    return (
        f"viewer of a live run: its next read after {appended:,} appended lines {refresh:.2f} s "
        f"({frame.height:,} rows; its first read {first:.2f} s); the hash of the whole log each "
        f"next read took before {whole:.2f} s"
    )


def _clear_snapshots(nights: Path) -> None:
    for folder in nights.glob("*/results.snapshot"):
        shutil.rmtree(folder)


def bench_snapshot(samples: int = 83_334) -> None:
    from tests.bench import _make_run

    with tempfile.TemporaryDirectory() as tmp:
        _make_run(tmp, samples)
        nights = Path(tmp) / "nights"
        nights.mkdir()
        (Path(tmp) / "run").rename(nights / "n1")
        shutil.copytree(nights / "n1", nights / "n2")
        manifest = nights / "n2" / "manifest.json"
        manifest.write_bytes(manifest.read_bytes().replace(b'"runId":"', b'"runId":"n2-', 1))
        old = _code_at(BASELINE, Path(tmp) / "baseline")
        rows = {}
        try:
            if old is not None:
                rows["before the snapshot (" + BASELINE + ")"] = _measure(nights, old)
            _clear_snapshots(nights)
            rows["today, first read (writes the snapshot)"] = _measure(nights, ROOT)
            rows["today, snapshot current"] = _measure(nights, ROOT)
        finally:
            if old is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)])
        size = (nights / "n1" / "results.ndjson").stat().st_size / 1e6
        print(
            f"readers of {12 * samples:,} records ({size:.0f} MB of NDJSON), whole process "
            "(seconds, peak RSS MB):"
        )
        print("code | " + " | ".join(f"{k} (target <= {t:g} s)" for k, t in TARGETS.items()))
        for name, got in rows.items():
            cells = [f"{got[k][0]:.2f} s, {got[k][1]:.0f} MB" for k in TARGETS]
            print(f"{name} | " + " | ".join(cells))
        now = rows["today, snapshot current"]
        ratios = ", ".join(f"{k} {now[k][0] / t:.2f}" for k, t in TARGETS.items())
        print(f"of target, snapshot current: {ratios}; view RSS {now['view'][1] / VIEW_RSS_MB:.2f}")
        print(_refresh(nights / "n1"))


if __name__ == "__main__":
    bench_snapshot(int(sys.argv[1]) if len(sys.argv) > 1 else 83_334)

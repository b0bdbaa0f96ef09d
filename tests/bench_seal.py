"""`make bench` part (issue 42): the seal's cost on `status` of a 1,000,008-record run whose
snapshot is current, as a ratio to the code before the seal (BASELINE), in one run.

Each code reads its own snapshot (the seal changed its format, so each first builds it once,
untimed); then `status` runs as a user runs it, a fresh process timed from its start, ROUNDS
times each, interleaved so that a busy moment of the machine falls on both. The seal's part of
it, the HMAC check and the sha256 of every part, is timed alone in this process as well.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench_snapshot import _code_at, _timed
from tests.conftest import ROOT

BASELINE = "0f0e505"  # main before issue 42
ROUNDS = 5


def _seal_check(run: Path) -> tuple[float, int]:
    """Seconds of the seal's own check of the run's current snapshot, and the parts' bytes."""
    import orjson

    from orchestrator.engine import columnar

    folder = run / columnar.FOLDER
    meta = orjson.loads((folder / columnar.META).read_bytes())
    size = sum((folder / p["name"]).stat().st_size for p in meta["parts"])
    t0 = time.perf_counter()
    assert columnar.sealed(meta["seal"], columnar._sealed_bytes(meta))
    assert all(columnar._part_is(folder / p["name"], p) for p in meta["parts"])
    return time.perf_counter() - t0, size


def bench_seal(samples: int = 83_334) -> None:
    from tests.bench import _make_run

    with tempfile.TemporaryDirectory() as tmp:
        _make_run(tmp, samples)
        run_new = Path(tmp) / "run"
        run_old = Path(tmp) / "run-old"
        shutil.copytree(run_new, run_old)
        old = _code_at(BASELINE, Path(tmp) / "baseline")
        if old is None:
            print("seal: not in a git clone with", BASELINE, "- skipped")
            return
        try:
            _timed(["status", str(run_old)], old)  # each builds its own snapshot, untimed
            _timed(["status", str(run_new)], ROOT)
            before, after = [], []
            for _ in range(ROUNDS):
                before.append(_timed(["status", str(run_old)], old))
                after.append(_timed(["status", str(run_new)], ROOT))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)])
        seconds, size = _seal_check(run_new)
        lines = sum(1 for _ in open(run_new / "results.ndjson", "rb"))
        b = statistics.median(s for s, _ in before)
        a = statistics.median(s for s, _ in after)
        rss_b = statistics.median(m for _, m in before)
        rss_a = statistics.median(m for _, m in after)
        print(
            f"status of a {lines:,}-record run, snapshot current, median of {ROUNDS} fresh "
            f"processes: before the seal ({BASELINE}) {b:.2f} s, {rss_b:.0f} MB; sealed "
            f"{a:.2f} s, {rss_a:.0f} MB; ratio {a / b:.2f} (time), {rss_a / rss_b:.2f} (peak RSS)"
        )
        print(
            f"  the seal's own check (HMAC of the meta, sha256 of {size / 1e6:.0f} MB of parts): "
            f"{seconds:.3f} s"
        )


if __name__ == "__main__":
    bench_seal(int(sys.argv[1]) if len(sys.argv) > 1 else 83_334)

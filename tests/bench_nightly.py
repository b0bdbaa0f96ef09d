"""`make bench` part: `compare` of two nights and `trend` over them, each night a
1,000,008-record run of the simulated respondent's answers (the size `analysis` is measured at),
timed and measured in a fresh process."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import orjson


def _second_night(first: Path) -> Path:
    """A copy of the run under another run id (the same answers: the figure is the reading)."""
    second = first.with_name("night2")
    shutil.copytree(first, second)
    manifest = orjson.loads((second / "manifest.json").read_bytes())
    manifest["runId"] = "night2"
    (second / "manifest.json").write_bytes(orjson.dumps(manifest))
    return second


def bench_nightly(samples: int = 83_334) -> None:
    from tests.bench import PEAK, _make_run, _peak_mb_of

    with tempfile.TemporaryDirectory() as tmp:
        _make_run(tmp, samples)
        first = Path(tmp) / "run"
        second = _second_night(first)
        for what, call in (
            (
                "compare",
                f"compare(run_effects(Path({str(first)!r})), run_effects(Path({str(second)!r})))",
            ),
            ("trend", f"collect(Path({tmp!r}))"),
        ):
            code = f"""
import time
from pathlib import Path
from orchestrator.nightly.compare import compare
from orchestrator.nightly.effects import run_effects
from orchestrator.nightly.trend_data import collect
t0 = time.perf_counter()
{call}
elapsed = time.perf_counter() - t0
{PEAK}"""
            seconds, peak, anon, _ = _peak_mb_of(code)
            print(
                f"{what} of two nights of 1,000,008 records each: {seconds:.2f} s (no target; "
                f"analysis of one such run has a 5 s target), peak heap {anon:.0f} MB, peak RSS {peak:.0f} MB"
            )

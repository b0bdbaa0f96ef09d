"""`make bench` part (issue 33, item 3): the engine's throughput as a user gets it, the whole
`orchestrator run` process from its start to its exit, against a static endpoint (so that the
client is what is measured), beside a bare aiohttp loop posting the same requests in a process
of its own, and beside the code of OLD (the engine before it got slower), alternating five times
in one sitting: medians of each.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from tests.bench_snapshot import _code_at
from tests.conftest import ROOT

OLD = "b2d1cb8"
CALLS_SAMPLES = 1667  # 6 experiments x 2 conditions x 1,667 samples: 20,004 calls
CONCURRENCY = 32
ROUNDS = 5
TARGET = 0.9  # of the bare loop's rate, whole process

BARE = """
import asyncio, sys, time
import aiohttp, orjson
url, n, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 600}],
                     "max_tokens": 256, "temperature": 0.7, "seed": 1})
async def main():
    todo = iter(range(n))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def worker():
            for _ in todo:
                async with s.post(url + "/chat/completions", data=body,
                                  headers={"Content-Type": "application/json"}) as resp:
                    orjson.loads(await resp.read())["choices"][0]["message"]["content"]
        await asyncio.gather(*(worker() for _ in range(concurrency)))
asyncio.run(main())
"""


def _config(folder: Path, url: str, job: str = "paired") -> Path:
    """The campaign (`job`: the built-in job's name in the code run; OLD called it
    ai-bias-benchmark)."""
    path = folder / "bench.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "bench"
            jobs = ["{job}"]
            samples = {CALLS_SAMPLES}
            output_dir = "{folder / "runs"}"
            [[models]]
            provider = "openai"
            name = "m"
            base_url = "{url}"
            [limits.openai]
            max_in_flight = {CONCURRENCY}
            """
        )
    )
    return path


def _whole(args: list[str], code: Path | None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of a fresh process, from its start to its exit."""
    wrapper = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
        "assert done.returncode == 0, done; "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    env = {**os.environ, "COLUMNS": "120"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    out = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=code or ROOT,
    ).stdout.split()
    return float(out[0]), float(out[1]) / 1024


def bench_engine_whole() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.static_server"], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    url = server.stdout.readline().strip()
    calls = 12 * CALLS_SAMPLES
    results: dict[str, list[tuple[float, float]]] = {"bare": [], "engine": [], "old": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        old = _code_at(OLD, folder / "old")
        try:
            for round_ in range(ROUNDS):
                results["bare"].append(
                    _whole(["-c", BARE, url, str(calls), str(CONCURRENCY)], None)
                )
                for name, code in (("engine", ROOT), ("old", old)):
                    if code is None:
                        continue
                    work = folder / f"{name}-{round_}"
                    work.mkdir()
                    cfg = _config(work, url, "paired" if name == "engine" else "ai-bias-benchmark")
                    results[name].append(_whole(["-m", "orchestrator", "run", str(cfg)], code))
        finally:
            server.terminate()
            server.wait()
            if old is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)])

    def median(name: str) -> tuple[float, float]:
        got = results[name]
        return statistics.median(w for w, _ in got), statistics.median(m for _, m in got)

    bare_s, bare_mb = median("bare")
    eng_s, eng_mb = median("engine")
    ratio = bare_s / eng_s
    line = (
        f"engine, whole `orchestrator run` process, {calls:,} calls at concurrency {CONCURRENCY} "
        f"against a static endpoint (median of {ROUNDS}, alternating): {eng_s:.2f} s, "
        f"{calls / eng_s:,.0f} calls/s, peak RSS {eng_mb:.0f} MB; bare aiohttp loop (its own "
        f"process) {bare_s:.2f} s, {bare_mb:.0f} MB; ratio {ratio:.2f} of the bare loop's rate "
        f"(target >= {TARGET}, {ratio / TARGET:.2f} of target)"
    )
    if results["old"]:
        old_s, old_mb = median("old")
        line += (
            f"; at {OLD}: {old_s:.2f} s ({bare_s / old_s:.2f} of the bare loop), {old_mb:.0f} MB"
            f" (today / {OLD}: {eng_s / old_s:.2f}x the time, {eng_mb / old_mb:.2f}x the memory)"
        )
    print(line)


if __name__ == "__main__":
    t0 = time.perf_counter()
    bench_engine_whole()

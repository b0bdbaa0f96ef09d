"""`make bench` part (issue 44): the Python API's overhead against the CLI on the simulated
10k-task run. Each is a whole process from start to exit: `orchestrator run CONFIG`, a script
calling `orchestrator.run(CONFIG)`, one calling it inside `asyncio.run` (as in a notebook: the
worker thread, the caller's loop waiting) and one awaiting `orchestrator.arun`, alternating in one sitting; medians of each,
and their ratios to the CLI."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SAMPLES = 834  # 6 experiments x 2 conditions x 834 samples: 10,008 tasks
ROUNDS = 3

SCRIPT = "import orchestrator\norchestrator.run({config!r}, run_id={run_id!r})\n"
AWAITED = (
    "import asyncio, orchestrator\nasyncio.run(orchestrator.arun({config!r}, run_id={run_id!r}))\n"
)
IN_LOOP = (
    "import asyncio, orchestrator\n"
    "async def main():\n"
    "    orchestrator.run({config!r}, run_id={run_id!r})\n"
    "asyncio.run(main())\n"
)


def _config(folder: Path) -> Path:
    path = folder / "bench.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "bench"
            jobs = ["paired"]
            samples = {SAMPLES}
            output_dir = "{folder / "runs"}"
            [[models]]
            provider = "simulated"
            name = "sim"
            temperature = 1.0
            [limits.simulated]
            max_in_flight = 32
            """
        )
    )
    return path


def _timed(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{args}: {done.returncode}\n{done.stderr[-2000:]}")
    return took


def bench_api() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = str(_config(folder))
        ways = {
            "cli": lambda i: [
                sys.executable,
                "-m",
                "orchestrator",
                "run",
                config,
                "--run-id",
                f"cli{i}",
            ],
            "api": lambda i: [sys.executable, "-c", SCRIPT.format(config=config, run_id=f"api{i}")],
            "api in a loop": lambda i: [
                sys.executable,
                "-c",
                IN_LOOP.format(config=config, run_id=f"loop{i}"),
            ],
            "arun": lambda i: [
                sys.executable,
                "-c",
                AWAITED.format(config=config, run_id=f"arun{i}"),
            ],
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        _timed(ways["cli"]("warm"), folder)  # the first run pays for cold imports
        for i in range(ROUNDS):
            for name, args in ways.items():
                times[name].append(_timed(args(i), folder))
    cli = statistics.median(times["cli"])
    print(f"Python API against the CLI, simulated run of {12 * SAMPLES:,} tasks, whole process:")
    for name, taken in times.items():
        median = statistics.median(taken)
        rounds = ", ".join(f"{t:.2f}" for t in taken)
        print(f"  {name:14} median {median:.2f} s ({rounds}); ratio to the CLI {median / cli:.3f}")

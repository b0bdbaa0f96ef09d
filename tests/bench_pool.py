"""`make bench` part: endpoint pools and replicas on Ray (issue 18).

(a) What the endpoint pool costs per call: the engine at full speed against near-free emulators,
    on one model with `base_url`, the same with `base_urls = [URL]` (a pool of one: the pool's
    own work and nothing else) and with two emulator processes behind the pool.
(b) SmolLM2 calls per second on 1 and 2 Ray replicas of this machine, next to the plain process
    backend with one slot; and what Ray adds around the calls (start-up, shut-down).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from orchestrator.providers.base import Completion

ROUNDS = 3  # alternated runs per side in (a), each side's best kept: the machine is shared


class _Instant:
    """A client that answers at once: timed behind a pool, what is left is the pool's own code."""

    answer = Completion("a", {"prompt_tokens": 1, "completion_tokens": 1}, "m", None, "stop")

    async def start(self) -> None: ...

    async def complete(self, task) -> Completion:
        return self.answer

    async def aclose(self) -> None: ...


def _pool_code_us(calls: int = 200_000) -> float:
    """CPU us per call the pool of two adds to a bare client, in-process, best of three: what the
    engine figures' difference comes to on a quiet machine; a shared one blurs them by more."""
    from orchestrator.providers.pool import EndpointPool
    from tests.bench import _timed

    task = SimpleNamespace(task_id="t")  # all the pool reads of a task

    async def drive(client) -> None:
        for _ in range(calls):
            await client.complete(task)

    def cpu(make) -> float:
        return min(_timed(lambda: asyncio.run(drive(make())))[1] for _ in range(3))

    bare = cpu(_Instant)
    pool = cpu(lambda: EndpointPool("m", [("a", _Instant()), ("b", _Instant())]))
    return (pool - bare) / calls * 1e6


def _best_runs(sides: dict[str, str | list[str]]) -> dict[str, tuple[float, float, int]]:
    """(wall s, client CPU s, results) of each side's fastest run, sides taking turns."""
    from tests.bench import _engine_run, _timed

    runs: dict[str, list] = {name: [] for name in sides}
    order = list(sides.items())
    for r in range(ROUNDS):  # each round starts with another side: a drifting load favours none
        for name, url in order[r % len(order) :] + order[: r % len(order)]:
            with tempfile.TemporaryDirectory() as tmp:  # a fresh run each time: nothing resumed
                written: list[int] = []
                wall, cpu = _timed(
                    lambda url=url, out=Path(tmp) / "run", w=written: w.append(
                        _engine_run(url, out)
                    )
                )
                runs[name].append((wall, cpu, written[0]))
    return {name: min(best) for name, best in runs.items()}


def bench_pool_overhead() -> None:
    from tests.bench import CONCURRENCY, _engine_run, _start_server

    servers = [_start_server(), _start_server()]
    (_, url1), (_, url2) = servers
    try:
        with tempfile.TemporaryDirectory() as tmp:
            _engine_run(url1, Path(tmp) / "warm-up")  # imports, caches and the server's first calls
        best = _best_runs(
            {
                "one endpoint (base_url = URL)": url1,
                "pool of one (base_urls = [URL])": [url1],
                "pool of two emulator processes": [url1, url2],
            }
        )
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait()
    print(
        f"endpoint pool overhead: the engine at concurrency {CONCURRENCY} on near-free emulators, "
        f"best of {ROUNDS} alternated runs each"
    )
    (wall0, cpu0, n0), *_ = best.values()
    for i, (name, (wall, cpu, n)) in enumerate(best.items()):
        line = f"  {name}: {n / wall:,.0f} calls/s, client CPU {cpu / n * 1e6:.1f} us per call"
        if i:  # against the first: the single endpoint
            line += (
                f"; pool/single {(n / wall) / (n0 / wall0):.2f} in calls/s, "
                f"{(cpu / n - cpu0 / n0) * 1e6:+.1f} us CPU per call"
            )
        print(line + f" ({n:,} results)")
    print(
        f"  the pool's own code, in-process behind a pool of two do-nothing clients: "
        f"{_pool_code_us():.1f} us CPU per call"
    )


def _replica_run(label: str, servers: int, samples: int, server: dict | None) -> float:
    """One local-model run: prints its rate and the time around its calls; returns the rate."""
    from tests.bench_local import _calls_span, _local_records

    t0 = datetime.now(UTC)
    records = _local_records(servers, samples, server=server)
    t1 = datetime.now(UTC)
    start, end = _calls_span(records)
    rate = len(records) / (end - start).total_seconds()
    spread = Counter(r["endpoint"] for r in records)
    print(
        f"  {label}: {rate:.2f} calls/s ({len(records)} calls, {2 * servers} in flight); "
        f"start-up {(start - t0).total_seconds():.1f} s, shut-down {(t1 - end).total_seconds():.1f} s; "
        f"calls per server {sorted(spread.values(), reverse=True)}"
    )
    return rate


def bench_ray_replicas(samples: int = 2) -> None:
    from orchestrator.spec.localmodel import default_model_path

    if importlib.util.find_spec("ray") is None:
        print("ray replicas: skipped (Ray is not installed: pip install -e '.[ray]')")
        return
    if default_model_path() is None:
        print("ray replicas: skipped (the [local] extra is not installed)")
        return
    print(
        f"local model on Ray (SmolLM2-135M, seed-000 prompts, structured output, {os.cpu_count()} cores; "
        "calls/s from the first call's start to the last one's end; start-up: until the first "
        "call, the cluster's start included; shut-down: after the last call's end)"
    )
    process = _replica_run("process backend, 1 slot (n_threads = cores)", 1, samples, None)
    for n in (1, 2):
        rate = _replica_run(
            f"Ray, {n} replica(s) of num_cpus = 1 (n_threads = 1)",
            n,
            samples,
            {"backend": "ray", "replicas": n, "num_cpus": 1},
        )
        print(f"    x{rate / process:.2f} of the process backend's 1 slot")


def bench_pool() -> None:
    bench_pool_overhead()
    bench_ray_replicas()

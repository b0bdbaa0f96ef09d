"""`make bench`: speed and memory figures measured in one run, printed as ratios to targets.

Not a test: these machines are shared and noisy, so nothing here fails a build.
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import anyio
import orjson

from tests.conftest import ROOT

CONCURRENCY = 32
CALLS = 24_000


# Sampled in the measured process: peak anonymous memory (heap), apart from file pages that
# memory-mapped reads add to RSS and the kernel can drop at will.
SAMPLER = """
import threading, time as _time
_peak_anon = [0]
def _sample():
    while True:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('RssAnon'):
                    _peak_anon[0] = max(_peak_anon[0], int(line.split()[1]))
        _time.sleep(0.005)
threading.Thread(target=_sample, daemon=True).start()
"""
PEAK = (
    "import resource; print(f'{elapsed:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} "
    "{_peak_anon[0]/1024:.0f}')"
)


def _peak_mb_of(code: str) -> tuple[float, float, float, str]:
    """Run code in a fresh interpreter: (seconds it reports, peak RSS MB, peak anonymous MB,
    everything else it printed)."""
    out = (
        subprocess.run(
            [sys.executable, "-c", SAMPLER + code],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        .stdout.strip()
        .splitlines()
    )
    seconds, peak, anon = out[-1].split()
    return float(seconds), float(peak), float(anon), "\n".join(out[:-1])


def bench_planning(n_samples: int = 83_334) -> None:
    # 6 experiments x 2 conditions x 1 model x 83,334 samples = 1,000,008 tasks
    code = f"""
import time
from orchestrator.spec.campaign import CampaignConfig
from orchestrator.session import build_campaign
from orchestrator.plan import Plan
cfg = CampaignConfig(name="b", jobs=["paired"], samples={n_samples},
                     models=[{{"provider": "simulated", "name": "m"}}])
campaign = build_campaign(cfg, None)
t0 = time.perf_counter()
plan = Plan(campaign)
n = sum(1 for _ in plan.tasks())
elapsed = time.perf_counter() - t0
print(n)
{PEAK}"""
    seconds, peak, _, n = _peak_mb_of(code)
    print(
        f"planning {int(n):,} tasks: {seconds:.2f} s (target <= 3 s, {seconds / 3:.2f} of target), "
        f"peak RSS {peak:.0f} MB incl. interpreter (target <= 300 MB, {peak / 300:.2f} of target)"
    )


def bench_resume_scan(lines: int = 1_000_000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.ndjson"
        code = f"""
import time, orjson, hashlib
from pathlib import Path
from orchestrator.engine.store import scan_results
rec = orjson.loads(open({str(ROOT / "tests" / "data" / "record.json")!r}, 'rb').read())
with open({str(path)!r}, 'wb') as f:
    for i in range({lines}):
        rec["taskId"] = hashlib.blake2b(i.to_bytes(8, "big"), digest_size=16).hexdigest()
        rec["sample"] = i
        f.write(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE))
t0 = time.perf_counter()
scan = scan_results(Path({str(path)!r}))
elapsed = time.perf_counter() - t0
print(len(scan.done), Path({str(path)!r}).stat().st_size)
{PEAK}"""
        seconds, peak, _, info = _peak_mb_of(code)
        done, size = map(int, info.split())
        print(
            f"resume scan of {done:,} result lines ({size / 1e6:.0f} MB): {seconds:.2f} s "
            f"(target <= 3 s, {seconds / 3:.2f} of target), peak RSS {peak:.0f} MB"
        )


def _start_server(*limits: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "emulate", "--port", "0", *limits],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    url = proc.stdout.readline().split()[-1]
    return proc, f"{url}/v1"


async def _bare_loop(url: str, bodies: list[bytes]) -> None:
    """What a hand-written script does: N coroutines posting and parsing, nothing else."""
    todo = iter(bodies)  # shared: next() never awaits, so no two coroutines take the same body
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:

        async def worker() -> None:
            for body in todo:
                async with session.post(
                    url + "/chat/completions",
                    data=body,
                    headers={"Content-Type": "application/json"},
                ) as resp:
                    orjson.loads(await resp.read())["choices"][0]["message"]["content"]

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def _bench_campaign(url: str | list[str], out: Path):
    """The bench's campaign on one endpoint (`url`), or on an endpoint pool (a list)."""
    from orchestrator.session import build_campaign
    from orchestrator.spec.campaign import CampaignConfig

    endpoint = {"base_urls": url} if isinstance(url, list) else {"base_url": url}
    cfg = CampaignConfig(
        name="bench",
        jobs=["paired"],
        samples=CALLS // 12,
        models=[{"provider": "openai", "name": "m", **endpoint}],
        limits={"openai": {"max_in_flight": CONCURRENCY}},
        output_dir=str(out),
    )
    return build_campaign(cfg, None)


def _engine_bodies(url: str) -> list[bytes]:
    """The request bodies the engine sends for the bench's plan, in its order: the baseline
    posts the same ones (the same prompts, and so the same answers to parse)."""
    from orchestrator.plan import Plan
    from orchestrator.providers.registry import make_provider

    campaign = _bench_campaign(url, Path(tempfile.gettempdir()))
    model = campaign.config.models[0]
    provider = make_provider(model, campaign.config.limit_for(model.limit_key))
    return [provider.body(task) for task in Plan(campaign).tasks()]


def _engine_run(url: str | list[str], out: Path) -> int:
    from orchestrator.engine.runner import execute
    from orchestrator.engine.store import RunStore
    from orchestrator.plan import Plan
    from orchestrator.providers.registry import make_provider

    campaign = _bench_campaign(url, out)
    cfg = campaign.config
    plan = Plan(campaign)
    store = RunStore(out)
    store.path.mkdir(parents=True, exist_ok=True)
    providers = {m.key: make_provider(m, cfg.limit_for(m.limit_key)) for m in cfg.models}
    anyio.run(execute, plan, store, set(), providers, lambda rec: None)
    return sum(1 for _ in open(store.results, "rb"))


def _timed(fn) -> tuple[float, float]:
    cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    fn()
    cpu1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
    return wall, (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)


def _throughput(what: str, *server_args: str) -> None:
    proc, url = _start_server(*server_args)
    bodies = _engine_bodies(url)
    try:
        asyncio.run(_bare_loop(url, bodies))  # warm-up of both sides
        bare, engine = [], []
        for _ in range(2):  # alternate, keep each side's best: the machine is shared
            bare.append(_timed(lambda: asyncio.run(_bare_loop(url, bodies))))
            with tempfile.TemporaryDirectory() as tmp:
                written = []
                engine.append(
                    (*_timed(lambda: written.append(_engine_run(url, Path(tmp) / "run"))),)
                )
        (bare_wall, bare_cpu), (eng_wall, eng_cpu) = min(bare), min(engine)
    finally:
        proc.terminate()
        proc.wait()
    bare_rate, eng_rate = len(bodies) / bare_wall, written[0] / eng_wall
    print(
        f"engine throughput at concurrency {CONCURRENCY}{what}: {eng_rate:,.0f} calls/s "
        f"({written[0]:,} results written and parsed) vs bare aiohttp loop {bare_rate:,.0f} calls/s "
        f"(the same {len(bodies):,} request bodies); ratio {eng_rate / bare_rate:.2f} (target >= 0.8)"
    )
    print(
        f"  client CPU per call: engine {eng_cpu / written[0] * 1e6:.0f} us, "
        f"bare loop {bare_cpu / len(bodies) * 1e6:.0f} us"
    )


def bench_engine_throughput() -> None:
    _throughput("")
    # Real providers send x-ratelimit-* headers on every reply, which the engine reads (and the
    # bare loop does not); limits far above what the bench reaches, so none is ever hit, and a
    # short window keeps the emulator's own accounting small.
    _throughput(
        ", rate-limit headers on every reply",
        "--rpm",
        "100000000",
        "--tpm",
        "100000000000",
        "--period-s",
        "0.05",
    )


def bench_local_model() -> None:
    from tests.bench_local import bench_local_model as run

    run()


def _make_run(tmp: str, samples: int) -> None:
    """A 6 x 2 x `samples`-record run of the simulated respondent's answers in tmp/run, made in a
    fresh interpreter (so the measurement after it starts clean)."""
    code = f"""
import time, orjson, random
from datetime import datetime, timezone
from pathlib import Path
from orchestrator.spec.campaign import CampaignConfig
from orchestrator.session import build_campaign
from orchestrator.plan import Plan
from orchestrator.session import manifest_for
from orchestrator.engine.records import Outcome, make_record
from orchestrator.providers.simulated import SimulatedProvider
from orchestrator.parse import parse_answer
from orchestrator.providers.base import Completion
cfg = CampaignConfig(name="b", jobs=["paired"], samples={samples}, output_dir={tmp!r},
                     models=[{{"provider": "simulated", "name": "m"}}])
campaign = build_campaign(cfg, None)
plan = Plan(campaign)
run = Path({tmp!r}) / "run"
run.mkdir()
(run / "manifest.json").write_bytes(orjson.dumps(manifest_for(campaign, plan)))
sim = SimulatedProvider(cfg.models[0])
now = datetime.now(timezone.utc)
with open(run / "results.ndjson", "wb") as f:
    for task in plan.tasks():
        text = sim.answer(task, random.Random(task.task_id))
        rec = make_record(task, Outcome("ok", 1, 1.0, now, now, Completion(text), parse_answer(text, task.cell.contract)))
        f.write(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE))
elapsed = 0.0
{PEAK}"""
    _peak_mb_of(code)


def bench_analysis(samples: int = 83_334) -> None:
    """analyze over a 1,000,008-record run made by the simulated respondent's answer model."""
    with tempfile.TemporaryDirectory() as tmp:
        _make_run(tmp, samples)  # the analysis below is measured in a fresh process
        code = f"""
import time
from pathlib import Path
from orchestrator.analysis.summary import analyze
run = Path({tmp!r}) / "run"
t0 = time.perf_counter()
summary = analyze(run).tables["summary"]
elapsed = time.perf_counter() - t0
print(int(summary["n_valid_0"].sum() + summary["n_valid_1"].sum()))
{PEAK}"""
        seconds, peak, anon, n = _peak_mb_of(code)
        size = (Path(tmp) / "run" / "results.ndjson").stat().st_size / 1e6
        print(
            f"analysis of {int(n):,} result records ({size:.0f} MB of NDJSON): {seconds:.2f} s "
            f"(target <= 5 s, {seconds / 5:.2f} of target); peak heap {anon:.0f} MB, peak RSS "
            f"{peak:.0f} MB (the rest is the memory-mapped results file, which the kernel can drop)"
        )


def bench_status(samples: int = 83_334) -> None:
    """`orchestrator status` of a 1,000,008-record run: every line checked, then summed."""
    with tempfile.TemporaryDirectory() as tmp:
        _make_run(tmp, samples)
        code = f"""
import time
from pathlib import Path
from orchestrator.engine.status import run_status
t0 = time.perf_counter()
table, summary = run_status(Path({tmp!r}) / "run")
elapsed = time.perf_counter() - t0
print(summary.split(";")[0])
{PEAK}"""
        seconds, peak, anon, state = _peak_mb_of(code)
        size = (Path(tmp) / "run" / "results.ndjson").stat().st_size / 1e6
        print(
            f"status of {12 * samples:,} result records ({size:.0f} MB of NDJSON; {state}): {seconds:.2f} s "
            f"(target <= 3 s, {seconds / 3:.2f} of target); peak heap {anon:.0f} MB (target <= "
            f"300 MB, {anon / 300:.2f} of target), peak RSS {peak:.0f} MB (with the memory-mapped file)"
        )


def _limited_run(url: str, limits: dict, samples: int) -> list[dict]:
    from rich.console import Console

    from orchestrator.session import build_campaign, run_campaign
    from orchestrator.spec.campaign import CampaignConfig

    with tempfile.TemporaryDirectory() as tmp:
        cfg = CampaignConfig(
            name="rate",
            jobs=["paired"],
            samples=samples,
            output_dir=tmp,
            models=[{"provider": "openai", "name": "m", "base_url": url, "max_tokens": 16}],
            limits={"openai": {"max_in_flight": 16, **limits}},
        )
        outcome = run_campaign(
            build_campaign(cfg, None), Console(file=open(os.devnull, "w")), False
        )
        return [
            orjson.loads(line)
            for line in (outcome.run_dir / "results.ndjson").read_bytes().splitlines()
        ]


def bench_rate_control() -> None:
    """Achieved / allowed rate when the emulator enforces the same limits the config states,
    counted where the limit is enforced: at the server."""
    import statistics
    import threading

    from orchestrator.emulator.server import Emulator, EmulatorConfig

    # 100 requests (6,000 tokens) a second, counted in 3 s windows: the pacer keeps a fixed 50 ms
    # allowance for late sends (engine/limits.py JITTER_S), 5% of a 1 s window (there it gets 0.94
    # of the rate), 1.6% of 3 s, 0.1% of the 60 s windows providers count in.
    for name, server_limits, limits in (
        ("RPM-bound", {"rpm": 300}, {"rpm": 300, "period_s": 3.0}),
        ("TPM-bound", {"tpm": 18000}, {"tpm": 18000, "period_s": 3.0}),
    ):
        server = Emulator(
            EmulatorConfig(period_s=3.0, latency_s=0.005, **server_limits)
        ).start_in_thread()
        occupancy, done = [], threading.Event()

        def sample() -> None:  # the server's token window, as full as it is, every 10 ms
            while not done.is_set():
                for window in list(server.windows.values()):
                    window._expire(time.monotonic())
                    occupancy.append(window.token_total)
                time.sleep(0.01)

        threading.Thread(target=sample, daemon=True).start()
        try:
            records = _limited_run(server.base_url("openai"), limits, samples=50)
        finally:
            done.set()
            server.stop()
        arrivals = [t for t, *_ in server.log.arrivals]
        rejected = sum(n for (_, status), n in server.log.statuses.items() if status == 429)
        if "rpm" in limits:
            achieved = (len(arrivals) - 1) / (max(arrivals) - min(arrivals))
            figure = f"{achieved:,.1f} of 100 allowed requests/s = {achieved / 100:.2f}"
        else:  # the middle of the run, away from the first window's fill and the last's drain
            middle = occupancy[len(occupancy) // 5 : -len(occupancy) // 5]
            share = statistics.mean(middle) / 18000
            figure = (
                f"the server's token window was {share:.2f} full on average (charges are "
                f"prompt + max_tokens at admission, settled to usage at the reply)"
            )
        print(
            f"rate control, {name}: {figure} (target >= 0.95); {rejected} answers were 429, "
            f"{len(records)} calls"
        )


def bench_bias_strength_analysis() -> None:
    """The full 11-bias analysis at the paper's scale: 11 biases x 5 variants x 4 strategies x
    8 models x 100 samples per condition (352,000 records), 10,000 bootstrap resamples."""
    with tempfile.TemporaryDirectory() as tmp:
        code = f"""
import json, time, orjson, random
from datetime import datetime, timezone
from pathlib import Path
job = json.load(open({str(ROOT / "jobs" / "bias-strength.json")!r}))
for bias in job["biases"]:  # exactly five variants each: reuse the written ones under new ids
    base = bias["variants"]
    bias["variants"] = [dict(base[i % len(base)], id=f"{{bias['slug']}}-v{{i}}") for i in range(5)]
Path({tmp!r}, "job.json").write_text(json.dumps(job))
from orchestrator.spec.campaign import CampaignConfig
from orchestrator.session import build_campaign
from orchestrator.plan import Plan
from orchestrator.session import manifest_for
from orchestrator.engine.records import Outcome, make_record
from orchestrator.providers.simulated import SimulatedProvider
from orchestrator.parse import parse_answer
from orchestrator.providers.base import Completion
models = [{{"provider": "simulated", "name": f"m{{i}}", "simulate": {{"seed": i, "effects": {{
    "decoy": {{"conditions": [{{"shares": {{"target": 0.4}}}}, {{"shares": {{"target": 0.4 + 0.05 * i}}}}]}},
    "anchoring": {{"conditions": [{{"mean": 100, "sd": 20}}, {{"mean": 100 + 20 * i, "sd": 20}}]}}}}}}}}
    for i in range(8)]
cfg = CampaignConfig(name="b", jobs=[str(Path({tmp!r}, "job.json"))], samples=100, output_dir={tmp!r}, models=models)
campaign = build_campaign(cfg, None)
plan = Plan(campaign)
run = Path({tmp!r}) / "run"
run.mkdir()
(run / "manifest.json").write_bytes(orjson.dumps(manifest_for(campaign, plan)))
sims = {{m.key: SimulatedProvider(m) for m in cfg.models}}
now = datetime.now(timezone.utc)
with open(run / "results.ndjson", "wb") as f:
    for task in plan.tasks():
        text = sims[task.cell.model_key].answer(task, random.Random(task.task_id))
        rec = make_record(task, Outcome("ok", 1, 1.0, now, now, Completion(text), parse_answer(text, task.cell.contract)))
        f.write(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE))
print(plan.total)
elapsed = 0.0
{PEAK}"""
        _, _, _, total = _peak_mb_of(code)
        code = f"""
import time
from pathlib import Path
from orchestrator.analysis.summary import analyze
t0 = time.perf_counter()
result = analyze(Path({tmp!r}) / "run")
elapsed = time.perf_counter() - t0
print(result.tables["bsi_summary"].height, result.tables["bsi_variants"].height)
{PEAK}"""
        seconds, peak, anon, info = _peak_mb_of(code)
        rows, variants = info.split()
        print(
            f"11-bias analysis of {int(total):,} records ({variants} variant rows, {rows} bias x model x "
            f"strategy rows, 10,000 bootstrap resamples, mixed models): {seconds:.1f} s (target < 60 s, "
            f"{seconds / 60:.2f} of target), peak heap {anon:.0f} MB, peak RSS {peak:.0f} MB"
        )


def bench_scoring() -> None:
    from tests.bench_scoring import bench_scoring as run

    run()


def bench_nightly() -> None:
    from tests.bench_nightly import bench_nightly as run

    run()


def bench_batch() -> None:
    from tests.bench_batch import bench_batch as run

    run()


def bench_snapshot() -> None:
    from tests.bench_snapshot import bench_snapshot as run

    run()


def bench_seal() -> None:
    from tests.bench_seal import bench_seal as run

    run()


def bench_engine_whole() -> None:
    from tests.bench_engine import bench_engine_whole as run

    run()


def bench_view() -> None:
    from tests.bench_view import bench_view as run

    run()


def bench_pool() -> None:
    from tests.bench_pool import bench_pool as run

    run()


def bench_api() -> None:
    from tests.bench_api import bench_api as run

    run()


def main() -> None:
    which = set(sys.argv[1:])
    for name, fn in (
        ("plan", bench_planning),
        ("scan", bench_resume_scan),
        ("status", bench_status),
        ("engine", bench_engine_throughput),
        ("engine-whole", bench_engine_whole),
        ("rate", bench_rate_control),
        ("analysis", bench_analysis),
        ("bias-strength", bench_bias_strength_analysis),
        ("local", bench_local_model),
        ("scoring", bench_scoring),
        ("nightly", bench_nightly),
        ("batch", bench_batch),
        ("view", bench_view),
        ("snapshot", bench_snapshot),
        ("seal", bench_seal),
        ("pool", bench_pool),
        ("api", bench_api),
    ):
        if not which or name in which:
            fn()


if __name__ == "__main__":
    main()

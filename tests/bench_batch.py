"""`make bench` part: one campaign of ~100,000 requests in batch mode against the emulator's
batch APIs (OpenAI: two batches of its 50,000 limit; Anthropic: one of 99,996), submitted,
polled and collected into records by `run`, timed and measured in a fresh process. The emulator
runs in a process of its own, so the figures are the client's."""

from __future__ import annotations

import subprocess
import sys
import tempfile

from tests.conftest import ROOT

SAMPLES = 8_333  # x 12 cells of the AI Bias Benchmark = 99,996 tasks

SERVER = """
import asyncio, signal
from orchestrator.emulator.server import Emulator, EmulatorConfig
server = Emulator(EmulatorConfig())
async def main():
    await server.start()
    print(server.url, flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
asyncio.run(main())
server.batch.jobs.close()  # its batches' files
"""


def bench_batch() -> None:
    from tests.bench import PEAK, _peak_mb_of

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        url = server.stdout.readline().strip()
        for protocol, name in (("openai", "gpt-4o-mini"), ("anthropic", "claude-3-5-haiku-latest")):
            base = url + "/v1" if protocol == "openai" else url
            with tempfile.TemporaryDirectory() as tmp:
                code = f"""
import os, time
from rich.console import Console
from orchestrator.session import run_campaign
from orchestrator.spec.campaign import CampaignConfig
from orchestrator.session import build_campaign
cfg = CampaignConfig(name="bench", jobs=["paired"], samples={SAMPLES}, output_dir={tmp!r},
                     models=[{{"provider": {protocol!r}, "name": {name!r}, "base_url": {base!r}, "batch": True}}],
                     limits={{{protocol!r}: {{"batch_poll_s": 0.5}}}})
t0 = time.perf_counter()
outcome = run_campaign(build_campaign(cfg, None), Console(file=open(os.devnull, "w")), handle_signals=False)
elapsed = time.perf_counter() - t0
assert outcome.exit_code == 0, outcome.state.fatal
lines = sum(1 for _ in open(outcome.run_dir / "results.ndjson", "rb"))
batches = sum(1 for _ in open(outcome.run_dir / "batches.ndjson", "rb") if b'"event":"created"' in _)
print(lines, batches)
{PEAK}"""
                seconds, peak, anon, out = _peak_mb_of(code)
                lines, batches = out.split()
                print(
                    f"batch mode, {protocol}: {int(lines):,} requests in {batches} batch(es) "
                    f"submitted and collected in {seconds:.2f} s, {anon:.0f} MB peak heap "
                    f"({peak:.0f} MB peak RSS)"
                )
    finally:
        server.terminate()
        server.wait()

"""`make bench` part `local`, and what the `pool` part shares with it: the local model's
calls per second, measured from the records of real runs (server start-up excluded)."""

from __future__ import annotations

import os
import tempfile

import orjson


def _local_records(
    slots: int, samples: int, threads: int | None = None, server: dict | None = None
) -> list[dict]:
    """The result records of a run on the local model: every call a real completion of the
    seed-000 prompts. `slots` servers, two calls in flight each; `server` replaces the
    [models.server] table (Ray replicas: then slots is their number)."""
    from rich.console import Console

    from orchestrator.session import build_campaign, run_campaign
    from orchestrator.spec.campaign import CampaignConfig

    with tempfile.TemporaryDirectory() as tmp:
        cfg = CampaignConfig(
            name="bench",
            jobs=["paired"],
            samples=samples,
            output_dir=tmp,
            models=[
                {
                    "provider": "local",
                    "temperature": 0.7,
                    "max_tokens": 48,
                    "seed": 1,
                    "structured_output": True,
                    "server": server or {"slots": slots, "n_threads": threads},
                }
            ],
            limits={"local": {"max_in_flight": 2 * slots}},
        )
        outcome = run_campaign(
            build_campaign(cfg, None), Console(file=open(os.devnull, "w")), False
        )
        return [
            orjson.loads(line)
            for line in (outcome.run_dir / "results.ndjson").read_bytes().splitlines()
        ]


def _calls_span(records: list[dict]):
    """(the first call's start, the last call's end), aware datetimes."""
    from datetime import datetime

    return (
        min(datetime.fromisoformat(r["startedAt"]) for r in records),
        max(datetime.fromisoformat(r["finishedAt"]) for r in records),
    )


def _local_rate(slots: int, samples: int, threads: int | None = None) -> tuple[float, int]:
    """Calls per second on the local model, from the first call's start to the last one's end
    (server start-up excluded)."""
    records = _local_records(slots, samples, threads)
    start, end = _calls_span(records)
    return len(records) / (end - start).total_seconds(), len(records)


def bench_local_model(samples: int = 4) -> None:
    from orchestrator.spec.localmodel import default_model_path

    if default_model_path() is None:
        print("local model: skipped (the [local] extra is not installed)")
        return
    one, n = _local_rate(1, samples)
    two, _ = _local_rate(2, samples)
    print(
        f"local model (SmolLM2-135M, {n} seed-000 calls, structured output, {os.cpu_count()} cores): "
        f"1 slot {one:.2f} calls/s, 2 slots {two:.2f} calls/s (x{two / one:.2f})"
    )

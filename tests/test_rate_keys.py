"""Rate limits as the server sees them: every request of a limit key, whoever sent it, counted
in sliding windows at the emulator."""

from __future__ import annotations

import orjson
import pytest

from orchestrator.emulator.server import Faults
from tests.conftest import openai_config, run_quietly, write_config
from tests.timing import most_in_any_window


def _records(run_dir):
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


@pytest.mark.slow
def test_no_burst_when_the_workers_come_back_from_a_429_pause(tmp_path, emulator):
    # A long pause with many workers waiting: on their stale slots they would all go at its end.
    server = emulator(Faults(rate_limited=0.05, retry_after_s=1.5), seed=6)
    rate, window = 20, 2.0
    outcome = run_quietly(
        openai_config(
            tmp_path,
            server.base_url("openai"),
            samples=3,
            limits=f"""
        rpm = {rate}
        period_s = {window}
        max_in_flight = 16
        max_attempts = 20""",
        )
    )
    assert outcome.exit_code == 0 and server.log.served["rate_limited"] > 0
    arrivals = [t for t, *_ in server.log.arrivals]
    assert most_in_any_window(arrivals, window, rate) <= rate


@pytest.mark.slow
def test_a_model_and_its_extractor_on_one_limit_key_share_its_limit(tmp_path, emulator):
    # Gemini states no limits in its headers: the key's own pacing is all that keeps to them.
    rate, window = 24, 2.0
    server = emulator(Faults(malformed=0.5), seed=4, rpm=rate, period_s=window)
    url = server.base_url("gemini")
    outcome = run_quietly(
        write_config(
            tmp_path,
            f"""
        name = "t"
        jobs = ["paired"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "gemini"
        name = "answering-model"
        base_url = "{url}"
        [extractor]
        provider = "gemini"
        name = "extractor-model"
        base_url = "{url}"
        max_tokens = 30
        [limits.gemini]
        rpm = {rate}
        period_s = {window}
        max_in_flight = 8
        """,
        )
    )
    records = _records(outcome.run_dir)
    asked = [model for _, _, model in server.log.arrivals if model == "extractor-model"]
    assert len(records) == 24 and len(asked) >= 5  # both called through the one key
    # the union of the model's and the extractor's requests keeps to the key's limit
    arrivals = [t for t, *_ in server.log.arrivals]
    assert most_in_any_window(arrivals, window, rate) <= rate
    assert not any(status == 429 for (_, status) in server.log.statuses)

"""While a model's tasks wait in batches, its progress line says what the batches are doing,
not a rate of 0.0/s and an ETA of hours (issue 32, item 4)."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from orchestrator.batch.journal import Batch, batches_summary
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.engine.progress import RunProgress
from orchestrator.engine.state import RunState
from orchestrator.session import load_campaign, run_campaign
from tests.test_batch_runs import batch_config


def test_the_summary_gives_states_and_the_providers_counts():
    from datetime import UTC, datetime

    at = datetime.now(UTC)
    batches = [
        Batch("a", "k", ["t"] * 100, at, "a.jsonl", "b1", state="in_progress",
              counts={"total": 100, "completed": 40, "failed": 2}),
        Batch("b", "k", ["t"] * 140, at, "b.jsonl", "b2", state="validating"),
    ]  # fmt: skip
    said = batches_summary(batches)
    assert said == "2 batches of 240 tasks: 1 in_progress, 1 validating; 40 completed, 2 failed"
    assert batches_summary([]) is None


def test_the_line_of_a_model_in_batch_shows_its_batches_not_a_rate():
    out = StringIO()
    state = RunState()
    progress = RunProgress(Console(file=out, width=200), {"k": ("openai/m", 240, 1)}, state)
    state.batches_now("k", "1 batch of 239 tasks: 1 in_progress; 12 completed")
    (line,) = [x for x in out.getvalue().splitlines() if x.startswith("progress")]
    assert "in batch: 1 batch of 239 tasks: 1 in_progress; 12 completed" in line
    assert "/s" not in line and "ETA" not in line
    state.batches_now("k", None)  # back online (or collected): the rate again
    assert "/s" in progress.lines()[0]


def test_a_batch_run_reports_its_batches_as_they_change(tmp_path, emulator):
    server = emulator()
    server.config.batch = BatchBehaviour(processing_s=1.0)
    cfg = batch_config(tmp_path, server)
    out = StringIO()
    outcome = run_campaign(load_campaign(cfg), Console(file=out, width=200), handle_signals=False)
    assert outcome.exit_code == 0
    lines = [x for x in out.getvalue().splitlines() if x.startswith("progress")]
    waiting = [x for x in lines if "in batch: 1 batch of" in x]
    assert waiting, out.getvalue()
    assert all("0.0/s" not in x and "ETA" not in x for x in waiting)


def test_the_live_display_shows_no_rate_or_time_left_for_a_model_in_batch():
    from types import SimpleNamespace

    from orchestrator.engine.progress import LeftColumn, RateColumn

    waiting = SimpleNamespace(fields={"in_batch": True}, finished_speed=None, speed=0.0)
    assert RateColumn().render(waiting).plain == "" and LeftColumn().render(waiting).plain == ""
    online = SimpleNamespace(fields={"in_batch": False}, finished_speed=None, speed=3.0)
    assert RateColumn().render(online).plain == "3.0/s"

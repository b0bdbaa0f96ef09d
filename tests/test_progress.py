"""What a run shows while it goes, on a terminal or off one (cron mails, CI logs)."""

from __future__ import annotations

import io

from rich.console import Console
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.engine.progress import RunProgress
from orchestrator.engine.state import RunState
from tests.conftest import write_config


def test_off_a_terminal_progress_lines_carry_rate_and_eta_per_model():
    out = io.StringIO()
    models = {"a1": ("openai/model-a", 100, 40), "b2": ("anthropic/model-b", 10, 0)}
    progress = RunProgress(Console(file=out, width=200), models, RunState(), log_every_s=0)
    progress._started -= 10  # ten seconds into this session
    with progress:
        for _ in range(20):
            progress.on_record({"modelKey": "a1", "status": "ok"})
        progress.on_record({"modelKey": "b2", "status": "failed"})
    last = out.getvalue().strip().splitlines()[-2:]
    assert last[0].startswith("progress openai/model-a: 60/100 done, 2.0/s, ETA 0:00:20")
    assert last[1].startswith("progress anthropic/model-b: 0/10 done, 0.0/s, ETA unknown")
    assert "failed 1" in last[1]


def test_the_plan_shows_a_local_or_simulated_model_as_free(tmp_path):
    cfg = write_config(
        tmp_path,
        """
        name = "free"
        jobs = ["paired"]
        samples = 2
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    result = CliRunner().invoke(app, ["plan", str(cfg)])
    assert result.exit_code == 0, result.output
    assert "free (runs locally)" in result.output and "no price" not in result.output

"""Batch mode's settings: what the plan and the budget say of it, and where it is refused or
left online."""

from __future__ import annotations

import io

import orjson
import pytest
from rich.console import Console

from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.plan import Plan
from orchestrator.session import load_campaign, run_campaign
from tests.conftest import cli, write_config
from tests.test_batch_runs import batch_config, records


def test_plan_shows_batch_mode_its_turnaround_and_price(tmp_path, emulator):
    server = emulator()
    online, batched = (
        cli(
            "plan",
            "--json",
            str(batch_config(tmp_path, server, batch=b, run_id=str(b))),
            cwd=tmp_path,
        )
        for b in (False, True)
    )
    a, b = orjson.loads(online.stdout)["models"][0], orjson.loads(batched.stdout)["models"][0]
    assert (a["batch"], b["batch"]) == (False, True) and b["turnaround"] == "within 24 hours"
    assert b["cost_usd"]["typical"] == pytest.approx(a["cost_usd"]["typical"] / 2)
    text = cli(
        "plan",
        str(batch_config(tmp_path, server, run_id="t")),
        cwd=tmp_path,
    ).stdout
    assert "batch mode, at the batch price; results within 24 hours" in text


@pytest.mark.parametrize(
    "setting, message",
    [
        ('provider = "simulated"\nname = "s"\nbatch = true', "has no batch API"),
        (
            'provider = "openai"\nname = "m"\nbase_url = "http://127.0.0.1:9/v1"\nanswers = "score"\nbatch = true',
            "batch APIs do not return",
        ),
    ],
)
def test_batch_mode_where_it_cannot_be_is_refused(tmp_path, setting, message):
    cfg = write_config(
        tmp_path,
        f"""
        name = "x"
        jobs = ["paired"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        {setting}
        """,
    )
    done = cli("run", str(cfg), cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "models[0].batch" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_run_batch_with_no_batch_model_is_refused(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "x"
        jobs = ["paired"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "s"
        """,
    )
    done = cli("run", str(cfg), "--batch", cwd=tmp_path)
    assert done.returncode == 2 and "--batch" in done.stderr and not (tmp_path / "runs").exists()


def test_the_budget_counts_the_batch_price(tmp_path, emulator):
    server = emulator()
    estimate = orjson.loads(
        cli(
            "plan",
            "--json",
            str(batch_config(tmp_path, server, batch=False, run_id="p")),
            cwd=tmp_path,
        ).stdout
    )["total"]["cost_usd"]
    between = f"{estimate * 0.75:.8f}"  # above the batch estimate (half), below the online one
    online = cli(
        "run",
        str(batch_config(tmp_path, server, batch=False, run_id="o")),
        "--budget",
        between,
        cwd=tmp_path,
    )
    assert online.returncode == 2 and "over the budget" in online.stderr
    batched = cli(
        "run", str(batch_config(tmp_path, server, run_id="b")), "--budget", between, cwd=tmp_path
    )
    assert batched.returncode == 0, batched.stderr


def test_a_study_making_several_calls_per_task_cannot_be_batched(tmp_path, emulator):
    server = emulator()
    cfg = batch_config(tmp_path, server)
    cfg.write_text(cfg.read_text().replace('jobs = ["paired"]', 'jobs = ["trace-audit-golden"]'))
    done = cli("run", str(cfg), cwd=tmp_path)
    flat = " ".join(done.stderr.split())  # wrapped at 160 columns, where the tmp path puts it
    assert done.returncode == 2 and "several calls per task" in flat, done.stderr
    assert "models[0].batch" in done.stderr and not (tmp_path / "runs").exists()


def test_run_batch_leaves_what_cannot_be_batched_online(tmp_path, emulator):
    """--batch: a scoring model and a preset of another service run online, and say why."""
    from tests.test_scoring import emulator_config

    server = emulator()
    cfg = emulator_config(tmp_path, server.base_url("openai"), "r1")
    cfg.write_text(
        cfg.read_text().replace(
            "[limits.openai]",
            f"""
[[models]]
provider = "openai"
name = "gpt-4o-mini"
base_url = "{server.base_url("openai")}"

[[models]]
preset = "vllm"
name = "served-here"
base_url = "{server.base_url("openai")}"

[limits.openai]
batch_poll_s = 0.05""",
        )
    )
    out = io.StringIO()
    outcome = run_campaign(
        load_campaign(cfg), Console(file=out, width=300), handle_signals=False, batch=True
    )
    printed = out.getvalue()
    assert outcome.exit_code == 0 and server.log.batches["openai"] == 1
    assert '--batch: openai/base-model runs online: answers = "score"' in printed
    assert "--batch: vllm:openai/served-here runs online: no batch API" in printed
    batched = {r["model"]["name"] for r in records(outcome.run_dir) if r["batchId"]}
    assert batched == {"gpt-4o-mini"}
    scored = [r for r in records(outcome.run_dir) if r["model"]["name"] == "base-model"]
    assert scored and all(r["response"]["mode"] == "score" for r in scored)


def test_batch_true_on_a_preset_of_another_service_is_refused(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "x"
        jobs = ["paired"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        preset = "groq"
        name = "llama-3.1-8b-instant"
        batch = true
        """,
    )
    done = cli("run", str(cfg), cwd=tmp_path)
    assert done.returncode == 2 and "preset 'groq' has no batch API" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_budget_never_stops_the_collection_of_batches_already_sent(tmp_path, emulator):
    """Collecting what is paid for costs nothing more: a budget their spend passes neither
    refuses the run that collects them nor cuts the collection short; it only stops sending."""
    server = emulator()
    server.config.batch = BatchBehaviour(processing_s=1.0)
    cfg = batch_config(tmp_path, server)
    estimate = orjson.loads(cli("plan", "--json", str(cfg), cwd=tmp_path).stdout)["total"][
        "cost_usd"
    ]
    sent = cli("run", str(cfg), "--no-wait", "--budget", f"{estimate * 1.01:.8f}", cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    low = cli("run", str(cfg), "--budget", f"{estimate * 0.2:.8f}", cwd=tmp_path)
    assert low.returncode == 3 and "budget reached" in low.stderr  # spent more than it allows
    total = Plan(load_campaign(cfg)).total
    assert len(records(tmp_path / "runs" / "b" / "r1")) == total  # every record collected
    assert server.log.batches["openai"] == 1


def test_a_budget_counts_batches_in_flight_when_there_is_more_to_send(
    tmp_path, emulator, monkeypatch
):
    """Batches in flight are charged when they come back: a run that would also send more is
    refused by a budget that the whole estimate passes."""
    from orchestrator.batch.api import BatchLimits
    from orchestrator.batch.openai import OpenAIBatch
    from orchestrator.providers.errors import Transient

    server = emulator()
    server.config.batch = BatchBehaviour(processing_s=30.0)
    cfg = batch_config(tmp_path, server, samples=4)
    monkeypatch.setattr(OpenAIBatch, "limits", BatchLimits(max_requests=20, max_bytes=2**27))
    sent = OpenAIBatch.submit

    async def once(self, *args):  # the first batch goes out, then the network fails
        if server.log.batches["openai"]:
            raise Transient("connection reset")
        return await sent(self, *args)

    monkeypatch.setattr(OpenAIBatch, "submit", once)
    first = run_campaign(
        load_campaign(cfg),
        Console(file=io.StringIO()),
        handle_signals=False,
        wait_for_batches=False,
    )
    assert server.log.batches["openai"] == 1 and first.exit_code == 1
    monkeypatch.setattr(OpenAIBatch, "submit", sent)
    whole = orjson.loads(cli("plan", "--json", str(cfg), cwd=tmp_path).stdout)["total"]["cost_usd"]
    refused = cli("run", str(cfg), "--no-wait", "--budget", f"{whole * 0.9:.8f}", cwd=tmp_path)
    assert refused.returncode == 2 and "over the budget" in refused.stderr
    assert server.log.batches["openai"] == 1

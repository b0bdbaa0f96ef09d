"""The response cache: a run calls models only for what earlier runs did not pay for, says which
results came from the cache, and never fails because of the cache file."""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from rich.console import Console
from typer.testing import CliRunner

from orchestrator.analysis.summary import analyze
from orchestrator.cache import store
from orchestrator.cli import app
from orchestrator.plan import Plan
from orchestrator.session import load_campaign, run_campaign
from tests.conftest import ROOT, write_config
from tests.test_scoring import emulator_config as scoring_config

TASKS = 6 * 2 * 3  # the benchmark's experiments x conditions x 3 samples, per model


def config(
    tmp_path: Path,
    url: str,
    run_id: str,
    models: tuple[str, ...] = ("fake-model",),
    *,
    cache: str = '"cache.sqlite"',
    temperature: float = 0.7,
    name: str | None = None,
) -> Path:
    entries = "".join(
        f"""
        [[models]]
        provider = "openai"
        name = "{model}"
        base_url = "{url}"
        temperature = {temperature}
        price = {{input = 1.0, output = 2.0}}
        """
        for model in models
    )
    return write_config(
        tmp_path,
        f"""
        name = "c"
        jobs = ["paired"]
        samples = 3
        seed = 3
        run_id = "{run_id}"
        output_dir = "{tmp_path / "runs"}"
        cache = {cache}
        {entries}
        [limits.openai]
        max_in_flight = 4
        """,
        name=name or f"{run_id}.toml",
    )


def run(cfg: Path, **overrides):
    """A run in-process, as `orchestrator run` makes it; with what it printed."""
    out = io.StringIO()
    outcome = run_campaign(
        load_campaign(cfg, overrides), Console(file=out, width=400), handle_signals=False
    )
    return outcome, out.getvalue()


def records(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


def arrivals(server) -> Counter:
    return Counter(model for _, _, model in server.log.arrivals)


def table(run_dir: Path, label: str) -> pl.DataFrame:
    """The analysis rows of one model."""
    frame = analyze(run_dir).tables["summary"]
    return frame.filter(pl.col("model") == label)


def test_a_second_model_added_to_a_campaign_calls_only_the_new_model(tmp_path, emulator):
    server = emulator()
    first, _ = run(config(tmp_path, server.base_url("openai"), "r1"))
    assert arrivals(server) == {"fake-model": TASKS}
    paid = {r["taskId"]: r for r in records(first.run_dir)}

    second, printed = run(
        config(tmp_path, server.base_url("openai"), "r2", ("fake-model", "other-model"))
    )
    assert second.exit_code == 0
    assert arrivals(server) == {"fake-model": TASKS, "other-model": TASKS}  # only the new half
    recs = records(second.run_dir)
    assert len(recs) == 2 * TASKS and {r["status"] for r in recs} == {"ok"}
    old = [r for r in recs if r["model"]["name"] == "fake-model"]
    new = [r for r in recs if r["model"]["name"] == "other-model"]
    assert {r["cachedFrom"] for r in old} == {"c/r1"} and {r["cachedFrom"] for r in new} == {None}
    assert {r["costUsd"] for r in old} == {0.0} and all(r["costUsd"] > 0 for r in new)
    for r in old:  # the same task (the same call), the answer paid for in r1, as it was
        was = paid[r["taskId"]]
        assert r["response"] == was["response"] and r["usage"] == was["usage"]
        assert (
            r["servedModel"] == was["servedModel"]
            and r["systemFingerprint"] == was["systemFingerprint"]
        )
    assert (
        f"response cache on, {tmp_path / 'cache.sqlite'}: answered {TASKS} of {2 * TASKS} calls"
        in printed
    )
    # The analysis of the cached model's answers is the one r1 made of them (to the last bits
    # of a float: the records are summed in another order).
    assert_frame_equal(
        table(second.run_dir, "openai/fake-model"),
        table(first.run_dir, "openai/fake-model"),
        rel_tol=1e-12,
        abs_tol=1e-12,
    )

    # A third run of the same campaign pays for nothing; its results come from both runs.
    third, _ = run(config(tmp_path, server.base_url("openai"), "r3", ("fake-model", "other-model")))
    assert len(server.log.arrivals) == 2 * TASKS
    assert Counter(r["cachedFrom"] for r in records(third.run_dir)) == {
        "c/r1": TASKS,
        "c/r2": TASKS,
    }


def test_the_cache_changes_neither_the_plan_nor_the_task_ids(tmp_path, emulator):
    url = emulator().base_url("openai")
    with_cache = Plan(load_campaign(config(tmp_path, url, "a")))
    without = Plan(load_campaign(config(tmp_path, url, "b", cache="false")))
    assert with_cache.fingerprint() == without.fingerprint()
    assert [t.task_id for t in with_cache.tasks()] == [t.task_id for t in without.tasks()]
    assert with_cache.campaign.config.models[0].key == without.campaign.config.models[0].key


def test_other_decoding_settings_are_other_calls(tmp_path, emulator):
    server = emulator()
    run(config(tmp_path, server.base_url("openai"), "r1"))
    second, _ = run(config(tmp_path, server.base_url("openai"), "r2", temperature=0.3))
    assert len(server.log.arrivals) == 2 * TASKS
    assert {r["cachedFrom"] for r in records(second.run_dir)} == {None}


def test_a_nightly_run_reads_nothing_from_the_cache(tmp_path, emulator):
    server = emulator()
    cfg = config(tmp_path, server.base_url("openai"), "r1")
    run(cfg)
    nightly, printed = run(cfg, run_id="auto")
    assert nightly.exit_code == 0 and nightly.run_dir.name != "r1"
    assert len(server.log.arrivals) == 2 * TASKS  # every call made again, tonight
    assert {r["cachedFrom"] for r in records(nightly.run_dir)} == {None}
    assert "not read (a run named by date sees today's model)" in printed


def test_a_nightly_run_resumed_by_its_folder_reads_nothing_from_the_cache(tmp_path, emulator):
    """The resume hint of a run named by date is its folder; resumed so, it is still nightly."""
    server = emulator()
    cfg = config(tmp_path, server.base_url("openai"), "r1")
    run(cfg)
    nightly, _ = run(cfg, run_id="auto")
    lines = (nightly.run_dir / "results.ndjson").read_bytes().splitlines(keepends=True)
    (nightly.run_dir / "results.ndjson").write_bytes(b"".join(lines[:5]))  # cut short
    from orchestrator.session import campaign_of_run

    out = io.StringIO()
    resumed = run_campaign(
        campaign_of_run(nightly.run_dir), Console(file=out, width=400), handle_signals=False
    )
    assert resumed.exit_code == 0 and len(server.log.arrivals) == 2 * TASKS + TASKS - 5
    assert {r["cachedFrom"] for r in records(nightly.run_dir)} == {None}
    assert "not read (a run named by date sees today's model)" in out.getvalue()


def test_a_corrupted_cache_file_is_skipped_with_a_warning(tmp_path, emulator):
    server = emulator()
    garbage = os.urandom(4096)
    (tmp_path / "cache.sqlite").write_bytes(garbage)
    outcome, printed = run(config(tmp_path, server.base_url("openai"), "r1"))
    assert outcome.exit_code == 0 and len(records(outcome.run_dir)) == TASKS
    assert printed.count("warning:") == 1
    assert f"the response cache {tmp_path / 'cache.sqlite'} could not be open" in printed
    assert "file is not a database" in printed and "fix: delete" in printed
    assert "off after the warning above" in printed
    assert (tmp_path / "cache.sqlite").read_bytes() == garbage  # left for the user to look at


def test_a_cache_locked_by_another_process_is_skipped_with_a_warning(
    tmp_path, emulator, monkeypatch
):
    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", 0.2)
    server = emulator()
    cfg = config(tmp_path, server.base_url("openai"), "r1")
    run(cfg)
    holder = sqlite3.connect(tmp_path / "cache.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process writing, for longer than the timeout
    try:
        outcome, printed = run(
            config(tmp_path, server.base_url("openai"), "r2", ("fake-model", "other-model"))
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert outcome.exit_code == 0 and len(records(outcome.run_dir)) == 2 * TASKS
    assert printed.count("warning:") == 1 and "database is locked" in printed
    assert "another process holds the cache locked" in printed
    # Readers are not locked out in WAL mode: r1's answers were still found.
    assert arrivals(server) == {"fake-model": TASKS, "other-model": TASKS}


def test_a_new_cache_file_locked_before_it_is_set_up_is_skipped_with_a_warning(
    tmp_path, emulator, monkeypatch
):
    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", 0.2)
    server = emulator()
    holder = sqlite3.connect(tmp_path / "cache.sqlite", isolation_level=None)  # rollback journal
    holder.execute("BEGIN EXCLUSIVE")  # no one else may even read
    try:
        outcome, printed = run(config(tmp_path, server.base_url("openai"), "r1"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert outcome.exit_code == 0 and len(records(outcome.run_dir)) == TASKS
    assert printed.count("warning:") == 1 and "database is locked" in printed


def test_two_processes_writing_one_cache_at_once_both_finish(tmp_path, emulator):
    server = emulator(latency_s=0.005)
    url, path = server.base_url("openai"), tmp_path / "shared.sqlite"
    configs = [config(tmp_path, url, f"p{i}", (f"model-{i}",), cache=f'"{path}"') for i in range(2)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    # A third writer in this process commits all along, so the runs' batches meet held locks.
    hammer = store.connect(path)
    # processes of their own: SQLite's locking between processes is what is tested
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "run", str(c), "--samples", "30"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c in configs
    ]
    commits = 0
    while any(p.poll() is None for p in procs):
        hammer.execute("BEGIN IMMEDIATE")
        hammer.execute(
            store._PUT, (os.urandom(16), "x", None, None, None, None, None, "hammer", "h", 0.0)
        )
        time.sleep(0.01)  # holding the write lock a while, as a batch of a large run does
        hammer.execute("COMMIT")
        commits += 1
        time.sleep(0.02)
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out + err
        assert "warning" not in out + err and "kept 360 new answers" in out
    kept = dict(hammer.execute("SELECT run_id, COUNT(*) FROM responses GROUP BY run_id").fetchall())
    hammer.close()
    assert kept == {"c/p0": 6 * 2 * 30, "c/p1": 6 * 2 * 30, "hammer": commits} and commits > 10


def test_scored_answers_and_their_premises_come_from_the_cache(tmp_path, emulator):
    server = emulator()
    url = server.base_url("openai")
    cfgs = []
    for run_id in ("s1", "s2"):
        cfg = scoring_config(tmp_path, url, run_id)
        cfg.write_text(
            cfg.read_text().replace('name = "s"', 'name = "s"\ncache = "cache.sqlite"', 1)
        )
        cfgs.append(cfg)
    first, _ = run(cfgs[0])
    calls = len(server.log.arrivals)
    second, printed = run(cfgs[1])
    assert len(server.log.arrivals) == calls  # every scoring call and premise was kept
    a = {r["taskId"]: r for r in records(first.run_dir)}
    b = records(second.run_dir)
    assert {r["cachedFrom"] for r in b} == {"s/s1"} and len(b) == len(a) > 100
    assert all(r["response"] == a[r["taskId"]]["response"] for r in b)


def test_no_cache_neither_reads_nor_writes_it(tmp_path, emulator):
    server = emulator()
    cfg = config(tmp_path, server.base_url("openai"), "r1")
    result = CliRunner().invoke(app, ["run", str(cfg), "--no-cache"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "cache.sqlite").exists() and "response cache" not in result.output


def test_cache_stats_and_prune(tmp_path, emulator):
    server = emulator()
    cfg = config(tmp_path, server.base_url("openai"), "r1")
    run(cfg)
    path = tmp_path / "cache.sqlite"
    runner = CliRunner()
    for how in (["--cache", str(path)], ["--config", str(cfg)]):
        shown = runner.invoke(app, ["cache", "stats", *how], env={"COLUMNS": "300"})
        assert shown.exit_code == 0, shown.output
        assert f"{path}: {TASKS} entries" in shown.output
        assert "openai/fake-model" in shown.output and "r1" in shown.output

    kept = runner.invoke(app, ["cache", "prune", "--older-than", "30d", "--cache", str(path)])
    assert (
        kept.exit_code == 0
        and f"deleted 0 entries older than 30d from {path}; {TASKS} left" in kept.output
    )
    before = path.read_bytes()
    for bad in ("soon", "30", "-1d", "d"):
        refused = runner.invoke(app, ["cache", "prune", "--older-than", bad, "--cache", str(path)])
        assert refused.exit_code == 2 and "is not a duration" in refused.output
    assert path.read_bytes() == before
    folder = runner.invoke(app, ["cache", "stats", "--cache", str(tmp_path)])
    assert folder.exit_code == 2 and "is a folder, not a cache file" in folder.output
    pruned = runner.invoke(app, ["cache", "prune", "--older-than", "0s", "--cache", str(path)])
    assert (
        pruned.exit_code == 0
        and f"deleted {TASKS} entries" in pruned.output
        and "0 left" in pruned.output
    )
    assert "0 entries" in runner.invoke(app, ["cache", "stats", "--cache", str(path)]).output


def test_a_task_of_several_calls_is_cached_only_when_all_of_them_were(tmp_path, emulator):
    """A study's own routine (engine/caller.py): its record says cachedFrom only if no call of
    the task was paid in this run."""
    import anyio

    from orchestrator.cache.provider import CachedProvider
    from orchestrator.engine.caller import Caller
    from orchestrator.engine.limits import KeyController
    from orchestrator.providers.openai import OpenAIProvider

    server = emulator()
    plan = Plan(load_campaign(config(tmp_path, server.base_url("openai"), "r1")))
    model, task = plan.campaign.config.models[0], next(plan.tasks())
    asks = {
        name: ({"role": "user", "content": f"{task.cell.messages[-1]['content']} ({name})"},)
        for name in ("first", "retry", "other")
    }

    async def routine(run_id: str, steps: tuple[str, ...]):
        cache = store.ResponseCache(tmp_path / "cache.sqlite", run_id, read=True, warn=pytest.fail)
        provider = CachedProvider(OpenAIProvider(model), model, cache)
        caller = Caller(
            provider, KeyController(plan.campaign.config.limit_for("openai")), task, lambda: None
        )
        texts = [(await caller.ask(asks[step])).text for step in steps]
        await provider.aclose()
        cache.close()
        return caller.completion(texts[-1]), texts

    paid, texts = anyio.run(routine, "r1", ("first", "retry"))
    assert paid.cached_from is None and len(server.log.arrivals) == 2
    again, same = anyio.run(routine, "r2", ("first", "retry"))
    assert again.cached_from == "r1" and same == texts and len(server.log.arrivals) == 2
    assert again.usage == paid.usage  # both calls' usage, as it was paid
    mixed, _ = anyio.run(routine, "r3", ("first", "other"))
    assert mixed.cached_from is None and len(server.log.arrivals) == 3  # one call paid tonight


def test_a_garbled_row_is_a_miss_not_a_failure(tmp_path, emulator):
    server = emulator()
    cfg = config(tmp_path, server.base_url("openai"), "r1")
    run(cfg)
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        garbled = db.execute(
            "UPDATE responses SET usage = 'not json' WHERE key IN "
            "(SELECT key FROM responses LIMIT 4)"
        ).rowcount
    assert garbled == 4
    second, printed = run(config(tmp_path, server.base_url("openai"), "r2"))
    assert second.exit_code == 0 and printed.count("warning:") == 1  # said once, for all four
    assert "`usage`" in printed and "not json" not in printed  # the field, never its value
    assert len(server.log.arrivals) == TASKS + 4  # those four paid again, the rest cached
    assert Counter(r["cachedFrom"] for r in records(second.run_dir)) == {"c/r1": TASKS - 4, None: 4}

"""The Python API (orchestrator.run, arun, load, Run, Campaign, Model, load_campaign, UserError):
each entry point, a run inside a running event loop, a bad config that writes nothing, and a
run stopped part way (a cancelled task) that resumes. The KeyboardInterrupt cases, in a process
and in a real Jupyter kernel, are in test_python_api_interrupt.py."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import orchestrator
from orchestrator import Campaign, Model, UserError

PAIRED_CELLS = 12  # the paired job: six experiments x two conditions


def campaign(tmp_path: Path, samples: int = 3, latency_ms: float = 0.0, **fields) -> Campaign:
    return Campaign(
        name="api",
        jobs=["paired"],
        samples=samples,
        output_dir=str(tmp_path / "runs"),
        models=[
            Model(
                provider="simulated",
                name="sim",
                temperature=1.0,
                simulate={
                    "latency_ms": latency_ms,
                    "parse_error_rate": 0.1,
                    "effects": {
                        "anchoring-first-number": {
                            "conditions": [{"mean": 1150, "sd": 120}, {"mean": 880, "sd": 120}]
                        }
                    },
                },
            )
        ],
        limits={"simulated": {"max_in_flight": 4}},
        **fields,
    )


def terminal_ids(run_dir: Path) -> list[str]:
    import orjson

    lines = (run_dir / "results.ndjson").read_bytes().splitlines()
    return [r["taskId"] for r in map(orjson.loads, lines) if r["status"] != "failed"]


def test_run_blocks_and_returns_the_run(tmp_path: Path) -> None:
    run = orchestrator.run(campaign(tmp_path, samples=4))
    assert isinstance(run, orchestrator.Run)
    assert run.path == tmp_path / "runs" / "api" / "default"
    status = run.status()
    assert status["complete"] and status["pending"] == 0
    assert status["models"][0]["tasks"] == PAIRED_CELLS * 4
    assert len(terminal_ids(run.path)) == PAIRED_CELLS * 4


def test_run_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    """As in a Jupyter cell: the blocking run called from a coroutine on a running loop, and
    `arun` awaited on it. The internals alone fail there ('Already running asyncio in this
    thread'); in a thread they fail on the signal handlers."""

    async def cell() -> tuple[orchestrator.Run, orchestrator.Run]:
        asyncio.get_running_loop()  # a loop is running in this thread
        blocking = orchestrator.run(campaign(tmp_path), run_id="blocking")
        awaited = await orchestrator.arun(campaign(tmp_path), run_id="awaited")
        return blocking, awaited

    blocking, awaited = asyncio.run(cell())
    for run in (blocking, awaited):
        assert run.status()["complete"]
        assert len(terminal_ids(run.path)) == PAIRED_CELLS * 3
    # the same campaign, the same draws: run ids apart, the answers are the same tasks'
    assert sorted(terminal_ids(blocking.path)) == sorted(terminal_ids(awaited.path))


def test_arun_leaves_the_event_loop_free(tmp_path: Path) -> None:
    """While the run goes on (each answer takes 20 ms), the caller's loop keeps running its
    other tasks: a ticker on the same loop ticks all along."""

    async def main() -> tuple[int, float]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        loop = asyncio.get_running_loop()
        start = loop.time()
        await orchestrator.arun(campaign(tmp_path, samples=4, latency_ms=20), progress=False)
        took = loop.time() - start
        ticker.cancel()
        return ticks, took

    ticks, took = asyncio.run(main())
    # 48 answers of 20 ms, 4 at a time: at least 0.24 s; a blocked loop would tick about never
    assert took >= 0.2
    assert ticks >= took / 0.01 * 0.3


def test_a_cancelled_arun_stops_cleanly_and_resumes(tmp_path: Path) -> None:
    """Cancelling the task stops the run as Ctrl-C does: the cancellation goes on, the lock is
    let go, what was written stays, and running again does only the rest, each task once."""
    slow = campaign(tmp_path, samples=20, latency_ms=40)
    run_dir = tmp_path / "runs" / "api" / "default"
    results = run_dir / "results.ndjson"

    async def start_then_cancel() -> None:
        task = asyncio.create_task(orchestrator.arun(slow, progress=False))
        while not (results.exists() and results.stat().st_size > 2_000):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(start_then_cancel())
    first = terminal_ids(run_dir)
    total = PAIRED_CELLS * 20
    assert 0 < len(first) < total
    status = orchestrator.load(run_dir).status()
    assert status["pending"] == total - len(first) and not status["complete"]
    again = orchestrator.run(slow)  # the lock was let go: no "in use" refusal
    done = terminal_ids(again.path)
    assert len(done) == len(set(done)) == total
    assert done[: len(first)] == first  # what was written stays, and is not called again


def test_a_run_folder_resumes_by_its_path(tmp_path: Path) -> None:
    run = orchestrator.run(campaign(tmp_path))
    before = (run.path / "results.ndjson").read_bytes()
    again = orchestrator.run(run.path)  # complete: no model is called, nothing appended
    assert again.path == run.path
    assert (run.path / "results.ndjson").read_bytes() == before
    with pytest.raises(UserError) as refused:
        orchestrator.run(run.path, samples=9)
    assert refused.value.field == "samples" and "cannot change a run" in str(refused.value)


def _nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"samples": 0}, "samples"),
        ({"limit": -1}, "limit"),
        ({"run_id": "../out"}, "run_id"),
        ({"models": ["nosuchpreset"]}, "models"),
        ({"models": ["nosuchpreset/x"]}, "models"),
        ({"budget": -1.0}, "budget"),
    ],
)
def test_a_bad_override_raises_before_anything_is_written(
    tmp_path: Path, overrides: dict, field: str
) -> None:
    with pytest.raises(UserError) as bad:
        orchestrator.run(campaign(tmp_path), **overrides)
    assert bad.value.field == field and bad.value.fix
    _nothing_written(tmp_path)


def test_a_bad_config_file_raises_naming_file_field_and_fix(tmp_path: Path) -> None:
    config = tmp_path / "campaign.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            name = "api"
            jobs = ["paired"]
            output_dir = "{tmp_path / "runs"}"
            [[models]]
            provider = "simulated"
            temprature = 1.0
            """
        )
    )
    for attempt in (lambda: orchestrator.run(config), lambda: orchestrator.load_campaign(config)):
        with pytest.raises(UserError) as bad:
            attempt()
        assert bad.value.file == str(config)
        assert bad.value.field == "models[0].temprature"
        assert "did you mean 'temperature'" in (bad.value.fix or "")
    _nothing_written(tmp_path)


def test_a_campaign_built_wrong_in_code_raises_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError) as typo:
        Model(provider="simulated", temprature=1.0)
    assert typo.value.field == "temprature" and "temperature" in (typo.value.fix or "")
    with pytest.raises(UserError) as nested:
        Campaign(name="x", jobs=["paired"], models=[{"provider": "simulated", "seed": "1"}])
    assert nested.value.field == "models[0].seed"
    # valid fields, but a job that does not exist: found when run, before anything is written
    with pytest.raises(UserError) as job:
        orchestrator.run(campaign(tmp_path).model_copy(update={"jobs": ["no-such-job"]}))
    assert job.value.field == "jobs[0]"
    _nothing_written(tmp_path)


def test_a_missing_key_raises_before_anything_is_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError) as missing:
        orchestrator.run(campaign(tmp_path), models=["openai/gpt-4o-mini"])
    assert "OPENAI_API_KEY" in str(missing.value)
    _nothing_written(tmp_path)


def test_a_run_in_use_raises_user_error_not_system_exit(tmp_path: Path) -> None:
    from orchestrator.engine.lock import RunLock

    run = orchestrator.run(campaign(tmp_path), run_id="held")
    with RunLock(run.path) as lock:
        lock.acquire()
        with pytest.raises(UserError) as busy:
            orchestrator.run(run.path)
    assert "in use" in str(busy.value)


def test_load_campaign_keeps_the_files_folder_for_relative_paths(
    tmp_path: Path, monkeypatch
) -> None:
    """A config naming its job file relatively, loaded from another folder and changed in code,
    still finds the job beside the config (output_dir, as on the command line, is the current
    folder's)."""
    from orchestrator.spec.builtin import builtin_dir

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "my-job.json").write_bytes((builtin_dir("jobs") / "paired.json").read_bytes())
    (folder / "campaign.toml").write_text(
        'name = "mine"\njobs = ["my-job.json"]\noutput_dir = "runs"\n'
        '[[models]]\nprovider = "simulated"\nname = "sim"\ntemperature = 1.0\n'
    )
    loaded = orchestrator.load_campaign(folder / "campaign.toml")
    assert isinstance(loaded, Campaign) and loaded.source == (folder / "campaign.toml").resolve()
    changed = loaded.model_copy(update={"samples": 2, "run_id": "changed"})
    run = orchestrator.run(changed)
    assert run.path == Path("runs/mine/changed") and run.status()["complete"]
    assert run.status()["models"][0]["tasks"] == PAIRED_CELLS * 2


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> orchestrator.Run:
    return orchestrator.run(campaign(tmp_path_factory.mktemp("finished"), samples=6))


def test_results_are_the_parquet_exports_rows(finished: orchestrator.Run, tmp_path: Path) -> None:
    results = finished.results()
    assert results.height == PAIRED_CELLS * 6
    readable = ["study", "experimentSlug", "biasSlug", "conditionLabel", "strategy", "variant"]
    readable += ["sample", "modelLabel", "answer", "choice", "value", "status", "costUsd"]
    readable += ["promptTokens", "completionTokens"]
    assert set(readable) <= set(results.columns)
    assert results["study"].unique().to_list() == ["paired"]
    assert results["modelLabel"].null_count() == results["conditionLabel"].null_count() == 0
    written = finished.export("parquet", out=tmp_path / "export")
    assert list(written.values()) == [results.height]
    assert_frame_equal(results, pl.read_parquet(next(iter(written))))


def test_lazy_results_are_the_same_rows(finished: orchestrator.Run) -> None:
    eager = finished.results()
    lazy = finished.results(lazy=True)
    assert isinstance(lazy, pl.LazyFrame)
    collected = lazy.collect()
    assert_frame_equal(collected, eager.select(collected.columns))  # answers under 4,096 chars
    assert {"promptTokens", "modelLabel", "conditionLabel"} <= set(collected.columns)


def test_lazy_results_take_each_tasks_final_record(tmp_path: Path) -> None:
    """A task that failed and then answered on resume is one row, its answer; one that only
    failed is one row, its last failure (results.final_mask, as the eager table)."""
    import orjson

    run = orchestrator.run(campaign(tmp_path))
    log = run.path / "results.ndjson"
    records = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    retried, failed_only = records[0], records[1]
    extra = [
        {**retried, "status": "failed", "response": None, "error": "before"},
        {**failed_only, "status": "failed", "response": None, "error": "first"},
        {**failed_only, "status": "failed", "response": None, "error": "last"},
    ]
    kept = [r for r in records if r["taskId"] != failed_only["taskId"]]
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [extra[0], *kept, *extra[1:]]))
    eager, lazy = run.results(), run.results(lazy=True).collect()
    assert eager.height == lazy.height == len(records)
    assert_frame_equal(lazy, eager.select(lazy.columns))
    row = eager.filter(pl.col("taskId") == failed_only["taskId"])
    assert row["status"].to_list() == ["failed"] and row["error"].to_list() == ["last"]
    assert eager.filter(pl.col("taskId") == retried["taskId"])["status"].to_list() != ["failed"]


def test_effects_are_the_analysis_effects(finished: orchestrator.Run) -> None:
    effects = finished.effects()
    summary = finished.tables()["summary"]
    assert set(effects["experiment"]) == set(summary["experimentSlug"])
    anchoring = effects.filter(pl.col("experiment") == "anchoring-first-number").row(0, named=True)
    row = summary.filter(pl.col("experimentSlug") == "anchoring-first-number").row(0, named=True)
    assert anchoring["effect"] == pytest.approx(row["effect"])
    assert anchoring["p"] == pytest.approx(row["p_value"])
    assert anchoring["ci_low"] < anchoring["effect"] < anchoring["ci_high"]
    assert not (finished.path / "summary.csv").exists()  # reading writes no analysis file


def test_report_and_export_write_their_files(finished: orchestrator.Run) -> None:
    paths = finished.report()
    assert paths["html"].is_file() and paths["markdown"].read_text().startswith("#")
    written = finished.export("ai-benchmark")
    assert sum(written.values()) == PAIRED_CELLS * 6
    with pytest.raises(UserError) as unknown:
        finished.export("xlsx")
    assert unknown.value.field == "format" and "parquet" in (unknown.value.fix or "")


def test_load_refuses_a_folder_that_is_no_run(tmp_path: Path) -> None:
    with pytest.raises(UserError) as bad:
        orchestrator.load(tmp_path)
    assert "not a run directory" in str(bad.value)


def test_import_is_quick_and_the_names_are_public() -> None:
    """`import orchestrator` loads neither polars nor the engine (the CLI's --help stays
    quick); the public names come when first used, typed (py.typed ships)."""
    code = (
        "import sys, orchestrator; "
        "print(sorted(m for m in ('polars', 'pydantic', 'orchestrator.api') if m in sys.modules))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert shown.stdout.strip() == "[]", shown.stderr
    for name in orchestrator.__all__:
        assert getattr(orchestrator, name) is not None
    assert orchestrator.UserError is UserError
    assert (Path(orchestrator.__file__).parent / "py.typed").is_file()
    for entry in (orchestrator.run, orchestrator.arun, orchestrator.load, orchestrator.Run):
        assert entry.__doc__ and len(entry.__doc__) > 80
    with pytest.raises(AttributeError):
        orchestrator.no_such_name  # noqa: B018


def test_a_failure_in_the_callers_thread_stops_the_run(tmp_path: Path, monkeypatch) -> None:
    """Whatever ends the caller's wait (here its output failing: a closed pipe) stops the run
    and lets its lock go, as an interrupt does: the next run of the folder is not refused as in
    use by this very process."""
    from orchestrator.api import running

    shown = 0

    def broken(self) -> None:
        nonlocal shown
        shown += 1
        if shown == 3:
            raise BrokenPipeError("stdout closed")

    slow = campaign(tmp_path, samples=20, latency_ms=40)
    with monkeypatch.context() as patch:
        patch.setattr(running._Started, "_show", broken)
        with pytest.raises(BrokenPipeError):
            orchestrator.run(slow, progress=False)
    run_dir = tmp_path / "runs" / "api" / "default"
    assert 0 < len(terminal_ids(run_dir)) < PAIRED_CELLS * 20
    again = orchestrator.run(slow, progress=False)
    done = terminal_ids(again.path)
    assert len(done) == len(set(done)) == PAIRED_CELLS * 20


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"models": [123]}, "models"),
        ({"budget": "x"}, "budget"),
        ({"budget": True}, "budget"),
        ({"output_dir": 5}, "output_dir"),
        ({"samples": True}, "samples"),
    ],
)
def test_an_override_of_the_wrong_type_is_a_user_error(
    tmp_path: Path, overrides: dict, field: str
) -> None:
    with pytest.raises(UserError) as bad:
        orchestrator.run(campaign(tmp_path), **overrides)
    assert bad.value.field == field
    _nothing_written(tmp_path)


def test_one_model_and_paths_are_taken_as_given(tmp_path: Path) -> None:
    """models="simulated" is one model (not its letters); a Path is as good as its text."""
    built = Campaign(
        name="paths",
        jobs=["paired"],
        samples=1,
        output_dir=tmp_path / "runs",
        models=[Model(provider="simulated", name="sim", temperature=1.0)],
    )
    run = orchestrator.run(built, models="simulated", run_id="one", progress=False)
    assert run.path == tmp_path / "runs" / "paths" / "one"
    assert {m["model"] for m in run.status()["models"]} == {"simulated/simulated"}

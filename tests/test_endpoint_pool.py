"""Endpoint pools (`base_urls`): each call goes to the least busy endpoint; one that cannot be
reached is set aside and probed back later; a failed attempt moves to another endpoint; results
say which endpoint answered; the endpoints are no part of the plan. Real HTTP servers on
loopback (the emulator), and ports where nothing listens."""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrator.emulator.server import Emulator, EmulatorConfig, Faults
from orchestrator.plan import Plan
from orchestrator.processes import free_port
from orchestrator.providers import pool as pool_module
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import Unreachable
from orchestrator.providers.openai import OpenAIProvider
from orchestrator.providers.pool import SET_ASIDE_AFTER, EndpointPool
from orchestrator.session import load_campaign
from tests.conftest import cli, run_quietly, write_config

FAST = "backoff_base_s = 0.01\nbackoff_max_s = 0.05\nmax_in_flight = 6"


def pool_config(
    tmp_path: Path,
    urls: list[str],
    *,
    samples: int = 2,
    limits: str = FAST,
    extra: str = "",
    run_id: str = "r1",
    job: str = "paired",
) -> Path:
    listed = ", ".join(f'"{u}"' for u in urls)
    return write_config(
        tmp_path,
        f"""
        name = "pool"
        jobs = ["{job}"]
        samples = {samples}
        seed = 3
        run_id = "{run_id}"
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "openai"
        name = "fake-model"
        base_urls = [{listed}]
        temperature = 0.7
        {extra}
        [limits.openai]
        {limits}
        """,
    )


def records(tmp_path: Path, run_id: str = "r1") -> list[dict]:
    path = tmp_path / "runs" / "pool" / run_id / "results.ndjson"
    return [json.loads(line) for line in path.read_text().splitlines()]


def arrivals(server: Emulator) -> int:
    return len(server.log.arrivals)


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there


def test_calls_spread_over_the_pool_and_each_result_names_its_endpoint(tmp_path, emulator):
    servers = [emulator(latency_s=0.02) for _ in range(3)]
    urls = [s.base_url("openai") for s in servers]
    outcome = run_quietly(pool_config(tmp_path, urls))
    recs = records(tmp_path)
    assert (
        outcome.exit_code == 0
        and len({r["taskId"] for r in recs}) == len(recs) == outcome.pending_before
    )
    assert all(r["status"] == "ok" and r["attempts"] == 1 for r in recs)
    by_endpoint = Counter(r["endpoint"] for r in recs)
    # each server answered exactly the calls its records name, and each took a fair share
    assert by_endpoint == {url: arrivals(s) for url, s in zip(urls, servers)}
    assert min(by_endpoint.values()) >= len(recs) / 3 * 0.6


def test_the_least_busy_endpoint_gets_the_call(tmp_path, emulator):
    """A slow server holds its calls longer, so it is busy more often and gets fewer: round
    robin would give both the same number."""
    slow, fast = emulator(latency_s=0.25), emulator(latency_s=0.0)
    run_quietly(
        pool_config(
            tmp_path,
            [slow.base_url("openai"), fast.base_url("openai")],
            limits=FAST.replace("6", "2"),
        )
    )
    recs = records(tmp_path)
    assert arrivals(slow) + arrivals(fast) == len(recs)
    assert arrivals(fast) > 4 * arrivals(slow) > 0


def test_an_endpoint_that_refuses_connections_costs_no_attempt(tmp_path, emulator):
    good = emulator()
    dead = dead_url()
    outcome = run_quietly(pool_config(tmp_path, [dead, good.base_url("openai")]))
    recs = records(tmp_path)
    assert outcome.exit_code == 0 and all(r["status"] == "ok" for r in recs)
    assert {r["endpoint"] for r in recs} == {good.base_url("openai")}
    # a refused connection moves on within the attempt: no retry, no backoff
    assert all(r["attempts"] == 1 for r in recs)


def test_a_failed_attempt_is_retried_on_another_endpoint(tmp_path, emulator):
    broken = emulator(faults=Faults(server_error=1.0))  # answers every call with a 500
    good = emulator()
    run_quietly(pool_config(tmp_path, [broken.base_url("openai"), good.base_url("openai")]))
    recs = records(tmp_path)
    assert all(r["status"] == "ok" for r in recs)
    assert {r["endpoint"] for r in recs} == {good.base_url("openai")}
    assert arrivals(broken) > 0
    # each call the broken server got cost its task exactly one more attempt: no retry went
    # back to it
    assert sum(r["attempts"] - 1 for r in recs) == arrivals(broken)
    assert arrivals(good) == len(recs)
    assert all(r["attempts"] <= 2 for r in recs)  # a retry never went back to the broken one


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_an_endpoint_set_aside_is_probed_back_and_used_again(tmp_path, monkeypatch):
    """Nothing listens on one port; after SET_ASIDE_AFTER refusals no call goes there until its
    probe time; then a server starts on that port and the probe brings it back."""
    clock = Clock()
    monkeypatch.setattr(pool_module, "monotonic", clock.monotonic)  # the pool's clock only
    campaign = load_campaign(pool_config(tmp_path, ["http://127.0.0.1:1/v1"]))
    tasks = list(Plan(campaign).tasks())
    model = campaign.config.models[0]
    other = Emulator(EmulatorConfig()).start_in_thread()
    port = free_port()
    revived = Emulator(EmulatorConfig())
    said: list[str] = []

    def client(url: str) -> OpenAIProvider:
        return OpenAIProvider(model.model_copy(update={"base_urls": None, "base_url": url}))

    urls = [f"http://127.0.0.1:{port}/v1", other.base_url("openai")]
    pool = EndpointPool("m", [(u, client(u)) for u in urls], said.append)

    async def scenario() -> tuple[list[str | None], list[str | None]]:
        before = [(await pool.complete(t)).endpoint for t in tasks[:8]]
        assert pool.endpoints[0].failures == SET_ASIDE_AFTER
        clock.now += pool_module.PROBE_FIRST_S - 0.01  # not yet its probe time: not tried
        assert (await pool.complete(tasks[8])).endpoint == urls[1]
        assert pool.endpoints[0].failures == SET_ASIDE_AFTER and pool.endpoints[0].wait_s == 1.0
        await revived.start(port=port)
        clock.now += 0.02
        after = [(await pool.complete(t)).endpoint for t in tasks[9:15]]
        await revived._runner.cleanup()
        await pool.aclose()
        return before, after

    try:
        before, after = asyncio.run(scenario())
    finally:
        other.stop()
    assert before == [urls[1]] * 8
    assert len(revived.log.arrivals) > 0 and urls[0] in after
    assert any("set aside" in s for s in said) and any("answers again" in s for s in said)


def test_endpoints_are_no_part_of_the_plan_and_a_run_resumes_with_one_more(tmp_path, emulator):
    """A run whose only server is down stops its model; the same run resumed with a second
    server added is the same plan, and finishes there."""
    good, dead = emulator(), dead_url()
    limits = FAST + "\nmax_attempts = 2"
    ids_one = [
        t.task_id for t in Plan(load_campaign(pool_config(tmp_path, [dead], limits=limits))).tasks()
    ]
    first = run_quietly(pool_config(tmp_path, [dead], limits=limits))
    assert first.exit_code == 1 and first.state.fatal
    both = pool_config(tmp_path, [dead, good.base_url("openai")], limits=limits)
    assert [t.task_id for t in Plan(load_campaign(both)).tasks()] == ids_one
    resumed = run_quietly(both)  # not refused as a changed plan
    assert resumed.exit_code == 0
    final = {r["taskId"]: r for r in records(tmp_path)}  # the last record of each task
    assert set(final) == set(ids_one)
    assert all(
        r["status"] == "ok" and r["endpoint"] == good.base_url("openai") for r in final.values()
    )


def test_a_preset_with_base_urls_drops_its_own_base_url(tmp_path):
    path = write_config(
        tmp_path,
        """
        name = "p"
        jobs = ["paired"]
        [[models]]
        preset = "vllm"
        name = "meta-llama/Llama-3.1-8B-Instruct"
        base_urls = ["http://gpu-1:8000/v1", "http://gpu-2:8000/v1"]
        """,
    )
    model = load_campaign(path).config.models[0]
    assert model.base_url is None and model.base_urls == [
        "http://gpu-1:8000/v1",
        "http://gpu-2:8000/v1",
    ]


@pytest.mark.parametrize(
    "model, field, says",
    [
        (
            'provider = "openai"\nname = "m"\nbase_url = "http://a/v1"\nbase_urls = ["http://b/v1"]',
            "models[0].base_urls",
            "both base_url and base_urls",
        ),
        ('provider = "openai"\nname = "m"\nbase_urls = []', "models[0].base_urls", "empty"),
        (
            'provider = "openai"\nname = "m"\nbase_urls = ["http://a/v1", "a:8000/v1"]',
            "models[0].base_urls[1]",
            "no http://",
        ),
        (
            'provider = "openai"\nname = "m"\nbase_urls = ["http://a/v1", "http://a/v1/"]',
            "models[0].base_urls[1]",
            "twice",
        ),
        (
            'provider = "openai"\nname = "m"\nbase_urls = ["http://user:sk-secret@a/v1"]',
            "models[0].base_urls[0]",
            "credential",
        ),
        (
            'provider = "openai"\nname = "m"\nbatch = true\nbase_urls = ["https://api.openai.com/v1"]',
            "models[0].base_urls",
            "batch",
        ),
        ('provider = "local"\nbase_urls = ["http://a/v1"]', "models[0].base_urls", "calls no URL"),
        (
            'provider = "local"\n[models.server]\nreplicas = 2',
            "models[0].server.replicas",
            'backend = "ray"',
        ),
        (
            'provider = "local"\n[models.server]\nbackend = "ray"\nslots = 2',
            "models[0].server.slots",
            "replicas = 2",
        ),
        (
            'provider = "local"\n[models.server]\nbackend = "ray"\nnum_cpus = 1\n'
            f"replicas = {(os.cpu_count() or 1) + 1}",
            "models[0].server.replicas",
            "more than this machine's",
        ),
        (
            'provider = "local"\n[models.server]\nbackend = "ray"\naddress = "a:6379"\n'
            '[[models]]\nprovider = "local"\ntemperature = 0.5\n[models.server]\nbackend = "ray"\n'
            'address = "b:6379"',
            "models[1].server.address",
            "different clusters",
        ),
        (
            'provider = "local"\n[models.server]\nbackend = "ray"\naddress = "ray://me:hunter2@head:10001"',
            "models[0].server.address",
            "credential",
        ),
    ],
)
def test_a_bad_pool_or_replica_setting_is_refused_before_anything_is_written(
    tmp_path, model, field, says
):
    path = write_config(
        tmp_path,
        f"""
        name = "bad"
        jobs = ["paired"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        {model}
        """,
    )
    result = cli("run", str(path), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    out = " ".join((result.stdout + result.stderr).split())  # the terminal's line breaks aside
    assert field in out and says in out and "fix:" in out
    assert "sk-secret" not in out
    assert not (tmp_path / "runs").exists()


def test_scored_answers_through_a_pool_name_their_endpoint(tmp_path, emulator):
    """A scoring model makes several calls per task; its record names the server of the last."""
    servers = [emulator(), emulator()]
    urls = [s.base_url("openai") for s in servers]
    from tests.test_scoring import small_job  # a job of choices only

    run_quietly(
        pool_config(
            tmp_path, urls, samples=1, extra='answers = "score"', job=str(small_job(tmp_path))
        )
    )
    recs = records(tmp_path)
    assert recs and all(r["response"]["mode"] == "score" for r in recs)
    assert {r["endpoint"] for r in recs} <= set(urls) and all(r["endpoint"] for r in recs)
    assert sum(arrivals(s) for s in servers) > len(recs)  # several scoring calls per task


def test_calls_in_flight_when_an_endpoint_dies_set_it_aside_once(tmp_path, monkeypatch):
    """Ten calls refused at once set the endpoint aside once, for the first wait (1 s), not for
    the longest; probes that fail double the wait; with every endpoint set aside the attempt
    fails at once with the wait to the first probe as its hint, so the engine's retry waits."""
    clock = Clock()
    monkeypatch.setattr(pool_module, "monotonic", clock.monotonic)  # the pool's clock only
    campaign = load_campaign(pool_config(tmp_path, ["http://127.0.0.1:1/v1"]))
    tasks = list(Plan(campaign).tasks())
    model = campaign.config.models[0]
    dead = [dead_url(), dead_url()]
    said: list[str] = []
    pool = EndpointPool(
        "m",
        [
            (u, OpenAIProvider(model.model_copy(update={"base_urls": None, "base_url": u})))
            for u in dead
        ],
        said.append,
    )

    async def scenario() -> list[Unreachable]:
        errors = []

        async def one(task) -> None:
            try:
                await pool.complete(task)
            except Unreachable as exc:
                errors.append(exc)

        await asyncio.gather(*(one(t) for t in tasks[:10]))
        assert [e.back_at - clock.now for e in pool.endpoints] == [1.0, 1.0]
        assert sum("set aside" in s for s in said) == 2  # once per endpoint
        for expected in (2.0, 4.0):  # each failed probe doubles the wait
            clock.now = pool.endpoints[0].back_at
            await one(tasks[10])
            assert pool.endpoints[0].back_at - clock.now == expected
        await one(tasks[11])  # nothing is due: no connection tried, a hint to wait
        await pool.aclose()
        return errors

    errors = asyncio.run(scenario())
    assert len(errors) == 13
    assert errors[-1].retry_after == pytest.approx(pool.endpoints[1].back_at - clock.now)
    assert 0 < errors[-1].retry_after <= 4.0


def test_batch_mode_leaves_a_pooled_model_online_and_says_why(tmp_path, emulator):
    server = emulator()
    path = pool_config(tmp_path, [server.base_url("openai")], samples=1)
    result = cli("run", str(path), "--batch", cwd=tmp_path)
    out = " ".join((result.stdout + result.stderr).split())
    # it is the campaign's only model, so nothing is left to batch: refused, with the reason
    assert "runs online: it is served by an endpoint pool" in out and result.returncode == 2, out


def test_the_same_model_name_pooled_on_two_services_is_two_models(tmp_path):
    path = write_config(
        tmp_path,
        """
        name = "p"
        jobs = ["paired"]
        [[models]]
        preset = "groq"
        name = "llama-3.1-8b"
        base_urls = ["http://a/v1"]
        [[models]]
        preset = "together"
        name = "llama-3.1-8b"
        base_urls = ["http://a/v1"]
        """,
    )
    one, two = load_campaign(path).config.models
    assert one.key != two.key


def test_a_local_run_resumes_from_its_manifest(tmp_path):
    """The manifest holds every server field; read back, the process backend's defaults are
    not taken for replica settings (that failed every resume by folder of a local model)."""
    from orchestrator.session import campaign_of_run, manifest_for
    from orchestrator.spec.localmodel import default_model_path

    if default_model_path() is None:
        pytest.skip("the local model is not installed")
    path = write_config(
        tmp_path,
        """
        name = "l"
        jobs = ["paired"]
        [[models]]
        provider = "local"
        """,
    )
    campaign = load_campaign(path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps(manifest_for(campaign, Plan(campaign))))
    again = campaign_of_run(run_dir)
    assert again.config.models[0].key == campaign.config.models[0].key


class Switch:
    """A client whose server is down (refuses) or up (answers once `gate` opens)."""

    def __init__(self) -> None:
        self.up, self.gate, self.calls = False, asyncio.Event(), 0

    async def start(self) -> None: ...

    async def complete(self, task) -> Completion:
        self.calls += 1
        if not self.up:
            raise Unreachable("connection refused")
        await self.gate.wait()
        return Completion("an answer")

    async def aclose(self) -> None: ...


def test_a_call_finding_every_endpoint_on_probe_waits_for_the_probes(monkeypatch):
    """Both servers were set aside and are back; their probes are slow generations. A third call
    meanwhile has no endpoint to try: it waits for a probe's outcome and is then answered,
    instead of failing at once (which would spend the task's retries, then stop the model)."""
    clock = Clock()
    monkeypatch.setattr(pool_module, "monotonic", clock.monotonic)  # the pool's clock only
    switches = [Switch(), Switch()]
    pool = EndpointPool("m", [("a", switches[0]), ("b", switches[1])])
    tasks = [SimpleNamespace(task_id=str(i)) for i in range(6)]

    async def scenario() -> list:
        for t in tasks[:3]:  # each call is refused by both: both are set aside
            with pytest.raises(Unreachable):
                await pool.complete(t)
        assert all(e.aside for e in pool.endpoints)
        clock.now += pool_module.PROBE_FIRST_S
        for s in switches:
            s.up = True
        probes = [asyncio.ensure_future(pool.complete(t)) for t in tasks[3:5]]
        await asyncio.sleep(0)
        assert all(e.probing for e in pool.endpoints)
        third = asyncio.ensure_future(pool.complete(tasks[5]))
        await asyncio.sleep(0.01)
        assert not third.done()  # waiting, not failed
        for s in switches:
            s.gate.set()
        return await asyncio.gather(*probes, third)

    answers = asyncio.run(scenario())
    assert [a.text for a in answers] == ["an answer"] * 3
    assert not any(e.aside for e in pool.endpoints)


def test_when_the_first_model_cannot_join_ray_the_others_fail_the_same_way(monkeypatch):
    """Models join one shared connection; when the first one's join fails, those waiting for it
    get its error, and nothing is started twice or left running."""
    from orchestrator.cluster import head as head_module
    from orchestrator.errors import UserError

    started, stopped = [], []

    async def failing_connect(self) -> None:
        started.append(self)
        await asyncio.sleep(0.01)
        raise UserError("cannot join the Ray cluster at x:1: refused")

    monkeypatch.setattr(head_module.Head, "connect", failing_connect)
    monkeypatch.setattr(head_module.Head, "stop", lambda self: stopped.append(self))

    async def scenario() -> list:
        return await asyncio.gather(
            *(head_module.join("x:1", 5, print) for _ in range(3)), return_exceptions=True
        )

    errors = asyncio.run(scenario())
    assert len(started) == 1 and all(isinstance(e, UserError) for e in errors)
    assert head_module._shared is None


def test_models_share_one_ray_connection_and_the_last_one_closes_it(monkeypatch):
    from orchestrator.cluster import head as head_module

    started, stopped = [], []

    async def connect(self) -> None:
        started.append(self)
        await asyncio.sleep(0.01)

    monkeypatch.setattr(head_module.Head, "connect", connect)
    monkeypatch.setattr(head_module.Head, "stop", lambda self: stopped.append(self))

    async def scenario() -> None:
        stopped.clear()
        heads = await asyncio.gather(*(head_module.join(None, 5, print) for _ in range(3)))
        assert len(set(map(id, heads))) == 1 and heads[0].users == 3
        for h in heads[:2]:
            await head_module.leave(h)
        assert not stopped
        await head_module.leave(heads[2])
        assert stopped == [heads[0]] and head_module._shared is None

    asyncio.run(scenario())
    asyncio.run(scenario())  # a second run in the same process starts afresh
    assert len(started) == 2

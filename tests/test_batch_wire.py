"""The three batch clients against the emulator: the same bodies as online, a full round trip,
a batch found again after its creation went unrecorded, item failures as the online errors."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import anyio
import orjson
import pytest

from orchestrator.batch.anthropic import AnthropicBatch
from orchestrator.batch.api import Unconfirmed
from orchestrator.batch.clients import batch_api
from orchestrator.batch.gemini import GeminiBatch
from orchestrator.batch.openai import OpenAIBatch
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.plan import Plan
from orchestrator.providers.errors import Fatal, TooLong, Transient
from orchestrator.providers.registry import make_provider
from orchestrator.session import build_campaign
from orchestrator.spec.campaign import CampaignConfig
from orchestrator.spec.limits import LimitConfig

PROTOCOLS = ["openai", "anthropic", "gemini"]
KEY = "sk-batch-Zq81xV0pLmT4sEcret9"
CLASSES = {"openai": OpenAIBatch, "anthropic": AnthropicBatch, "gemini": GeminiBatch}


def client(protocol: str, server, monkeypatch, samples: int = 3):
    """The batch client of a model served by `server`, and the model's tasks."""
    monkeypatch.setenv("BATCH_TEST_KEY", KEY)
    cfg = CampaignConfig(
        name="b",
        jobs=["paired"],
        samples=samples,
        models=[
            {
                "provider": protocol,
                "name": "m-1",
                "base_url": server.base_url(protocol),
                "seed": 7,
                "temperature": 0.5,
                "api_key_env": "BATCH_TEST_KEY",
            }
        ],
    )
    tasks = list(Plan(build_campaign(cfg, None)).tasks())
    api = batch_api(make_provider(cfg.models[0], LimitConfig()))
    api.wait_s = 0.01
    return api, tasks


def write(api, tasks, path):
    path.write_bytes(b"".join(api.line(t) + b"\n" for t in tasks))
    return path


async def run_batch(api, tasks, path, name="b-1"):
    uploaded = []
    submitted = await api.submit(name, write(api, tasks, path), len(tasks), uploaded.append)
    for _ in range(400):
        progress = await api.poll(submitted.batch_id)
        if progress.ended:
            break
        await anyio.sleep(0.02)
    items = [item async for item in api.items(submitted.batch_id)]
    return submitted, uploaded, progress, items


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_line_holds_the_online_body(emulator, monkeypatch, protocol):
    api, tasks = client(protocol, emulator(), monkeypatch)
    assert isinstance(api, CLASSES[protocol])
    task = tasks[1]
    entry = orjson.loads(api.line(task))
    online = orjson.loads(api.provider.body(task))
    body, custom_id = {
        "openai": (lambda e: (e["body"], e["custom_id"])),
        "anthropic": (lambda e: (e["params"], e["custom_id"])),
        "gemini": (lambda e: (e["request"], e["metadata"]["key"])),
    }[protocol](entry)
    assert body == online and custom_id == task.task_id
    if protocol != "anthropic":  # each sample its own seed, as online
        assert orjson.loads(api.line(tasks[0])) != entry
    assert api.limits.max_requests > 0 and api.turnaround


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_submit_poll_and_items_round_trip(emulator, monkeypatch, tmp_path, protocol):
    server = emulator()
    api, tasks = client(protocol, server, monkeypatch)
    api.chunk_bytes = 300  # the body streams in many pieces

    async def go():
        try:
            return await run_batch(api, tasks[:40], tmp_path / "in.jsonl")
        finally:
            await api.aclose()

    submitted, uploaded, progress, items = anyio.run(go)
    assert progress.ended and progress.error is None
    assert sorted(i.custom_id for i in items) == sorted(t.task_id for t in tasks[:40])
    assert all(i.error is None and isinstance(orjson.loads(i.completion.text), dict) for i in items)
    assert items[0].completion.usage["prompt_tokens"] > 20 and items[0].completion.served_model
    assert set(server.log.batch_items.values()) == {1} and server.log.batches[protocol] == 1
    assert uploaded == ([submitted.file_id] if protocol == "openai" else [])
    assert (submitted.file_id is not None) == (protocol == "openai")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_find_recovers_a_batch_created_but_never_recorded(
    emulator, monkeypatch, tmp_path, protocol
):
    server = emulator(batch=BatchBehaviour(processing_s=60))
    api, tasks = client(protocol, server, monkeypatch)
    since = datetime.now(UTC)

    async def go():
        try:
            path = write(api, tasks[:5], tmp_path / "in.jsonl")
            other = await api.submit(
                "other", write(api, tasks[5:12], tmp_path / "o.jsonl"), 7, lambda _: None
            )
            made = await api.submit("b-1", path, 5, lambda _: None)
            return (
                other,
                made,
                await api.find("b-1", since, 5),
                await api.find("never", since, 4),
                await api.find("b-1", since + timedelta(hours=1), 5),
            )
        finally:
            await api.aclose()

    other, made, found, never, later = anyio.run(go)
    assert found == [made.batch_id] and made.batch_id != other.batch_id
    assert never == [] and later == []


@pytest.mark.parametrize("protocol", ["openai", "gemini"])
def test_a_lost_answer_to_create_does_not_create_twice(emulator, monkeypatch, tmp_path, protocol):
    server = emulator(batch=BatchBehaviour(drop_replies={"create": 1, "poll": 2}))
    api, tasks = client(protocol, server, monkeypatch)

    async def go():
        try:
            return await run_batch(api, tasks[:6], tmp_path / "in.jsonl")
        finally:
            await api.aclose()

    _, _, progress, items = anyio.run(go)
    assert server.log.batches[protocol] == 1  # created once, found again after the lost answer
    assert server.log.batch_calls[(protocol, "create", 200)] == 1
    assert progress.ended and len(items) == 6 and all(i.completion for i in items)
    assert set(server.log.batch_items.values()) == {1}


def test_a_lost_answer_to_create_at_anthropic_is_unconfirmed_not_created_again(
    emulator, monkeypatch, tmp_path
):
    """Anthropic keeps no name: the batch found by its size may be another's, so submit says it
    is unconfirmed (the runner tells it by its results, settle.py) and creates nothing more."""
    server = emulator(batch=BatchBehaviour(drop_replies={"create": 1}))
    api, tasks = client("anthropic", server, monkeypatch)

    async def go():
        try:
            await api.submit("b-1", write(api, tasks[:6], tmp_path / "in.jsonl"), 6, lambda _: None)
        finally:
            await api.aclose()

    with pytest.raises(Unconfirmed):
        anyio.run(go)
    assert server.log.batches["anthropic"] == 1


def test_anthropic_find_names_every_batch_of_one_size_but_the_known(
    emulator, monkeypatch, tmp_path
):
    """Anthropic keeps no name: two batches of one size are both candidates (the runner tells
    them apart by their results), and a batch the run already knows is none."""
    api, tasks = client("anthropic", emulator(batch=BatchBehaviour(processing_s=60)), monkeypatch)
    since = datetime.now(UTC)

    async def go():
        try:
            made = [
                (
                    await api.submit(
                        name, write(api, tasks[:3], tmp_path / f"{name}.jsonl"), 3, lambda _: None
                    )
                ).batch_id
                for name in ("b-1", "b-2")
            ]
            return (
                made,
                await api.find("b-1", since, 3),
                await api.find("b-1", since, 3, frozenset(made[:1])),
            )
        finally:
            await api.aclose()

    made, both, one = anyio.run(go)
    assert sorted(both) == sorted(made) and one == [made[1]]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_failed_and_too_long_items_raise_the_online_errors(
    emulator, monkeypatch, tmp_path, protocol
):
    server = emulator(batch=BatchBehaviour(item_errors=0.5), echo_key=True)
    api, tasks = client(protocol, server, monkeypatch)

    async def go():
        try:
            first = await run_batch(api, tasks[:30], tmp_path / "a.jsonl", "a")
            server.config.context_tokens = 5
            server.config.batch = BatchBehaviour()
            return first, await run_batch(api, tasks[30:33], tmp_path / "b.jsonl", "b")
        finally:
            await api.aclose()

    (_, _, _, items), (_, _, _, too_long) = anyio.run(go)
    failed = [i for i in items if i.error is not None]
    assert failed and len(failed) < 30 and all(type(i.error) is Transient for i in failed)
    assert all(
        "500" in str(i.error) and "sent key=" in str(i.error) for i in failed
    )  # quoted, scrubbed
    assert len(too_long) == 3 and all(isinstance(i.error, TooLong) for i in too_long)
    for i in failed + too_long:
        assert not any(KEY[n : n + 8] in str(i.error) for n in range(len(KEY) - 7))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_expired_items_go_back_as_transient(emulator, monkeypatch, tmp_path, protocol):
    server = emulator(batch=BatchBehaviour(expire=1.0))
    api, tasks = client(protocol, server, monkeypatch)

    async def go():
        try:
            return await run_batch(api, tasks[:4], tmp_path / "in.jsonl")
        finally:
            await api.aclose()

    _, _, progress, items = anyio.run(go)
    assert progress.ended
    if protocol == "gemini":  # a Gemini batch expires whole, with no results
        assert progress.state == "BATCH_STATE_EXPIRED" and items == []
    else:
        assert progress.state == {"openai": "expired", "anthropic": "ended"}[protocol]
        assert len(items) == 4 and all(
            type(i.error) is Transient and "expired" in str(i.error) for i in items
        )
    assert not server.log.batch_items


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cancel_and_a_rejected_key(emulator, monkeypatch, tmp_path, protocol):
    server = emulator(batch=BatchBehaviour(processing_s=60), echo_key=True)
    api, tasks = client(protocol, server, monkeypatch)

    async def go():
        try:
            submitted = await api.submit(
                "b", write(api, tasks[:3], tmp_path / "in.jsonl"), 3, lambda _: None
            )
            await api.cancel(submitted.batch_id)
            progress = await api.poll(submitted.batch_id)
            items = [i async for i in api.items(submitted.batch_id)]
            server.config.keys = frozenset({"another-key"})
            with pytest.raises(Fatal) as rejected:
                await api.poll(submitted.batch_id)
            return progress, items, rejected.value
        finally:
            await api.aclose()

    progress, items, rejected = anyio.run(go)
    assert progress.ended and not server.log.batch_items
    assert (
        progress.state
        == {"openai": "cancelled", "anthropic": "ended", "gemini": "BATCH_STATE_CANCELLED"}[
            protocol
        ]
    )
    if protocol == "anthropic":
        assert len(items) == 3 and all(isinstance(i.error, Transient) for i in items)
    else:
        assert items == []
    assert "401" in str(rejected) and "sent key=" in str(rejected) and KEY[:8] not in str(rejected)


def test_a_failed_openai_validation_is_reported(emulator, monkeypatch, tmp_path):
    api, tasks = client("openai", emulator(), monkeypatch)

    async def go():
        try:
            path = tmp_path / "in.jsonl"
            path.write_bytes(b"".join(api.line(t) + b"\n" for t in itertools.repeat(tasks[0], 2)))
            submitted = await api.submit("b", path, 2, lambda _: None)
            return await api.poll(submitted.batch_id)
        finally:
            await api.aclose()

    progress = anyio.run(go)
    assert progress.ended and progress.state == "failed" and "duplicate_custom_id" in progress.error

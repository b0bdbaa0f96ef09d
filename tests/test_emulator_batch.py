"""The emulator speaks the three batch APIs: the official SDKs drive OpenAI's and Anthropic's as
they would the real ones; Gemini's batch mode is driven with plain HTTP."""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.request

import anthropic
import openai
import pytest

from orchestrator.emulator import batch_anthropic, batch_openai
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.emulator.batch_http import array_member

PROMPT = 'Choose Continue or Stop. Return JSON only: {"choice": "Continue"} or {"choice": "Stop"}.'


def chat(n: int) -> dict:
    return {
        "model": "m-1",
        "max_tokens": 20,
        "messages": [{"role": "user", "content": f"{PROMPT} #{n}"}],
    }


def openai_client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url("openai"), api_key="sk-x", max_retries=0)


def anthropic_client(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url("anthropic"), api_key="sk-x", max_retries=0)


def upload(client: openai.OpenAI, n: int, ids=None) -> str:
    lines = [
        json.dumps(
            {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": chat(i)}
        )
        for i, cid in enumerate(ids or [f"t{i}" for i in range(n)])
    ]
    return client.files.create(
        file=("in.jsonl", io.BytesIO("\n".join(lines).encode())), purpose="batch"
    ).id


def until(fetch, ended, tries: int = 200):
    for _ in range(tries):
        obj = fetch()
        if ended(obj):
            return obj
        time.sleep(0.05)
    raise AssertionError(f"never ended: {obj}")


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_openai_sdk_round_trip_with_partial_failures(emulator):
    server = emulator(batch=BatchBehaviour(item_errors=0.3))
    client = openai_client(server)
    file_id = upload(client, 40)
    assert client.files.retrieve(file_id).bytes > 0
    batch = client.batches.create(
        input_file_id=file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"bias_orchestrator": "b1"},
    )
    assert batch.status == "validating" and batch.metadata == {"bias_orchestrator": "b1"}
    seen = [client.batches.retrieve(batch.id).status]  # finalizing shows once, then completed
    done = until(lambda: client.batches.retrieve(batch.id), lambda b: b.status == "completed")
    assert seen == ["finalizing"]
    counts = done.request_counts
    assert (
        counts.total == 40 and counts.completed + counts.failed == 40 and 3 <= counts.failed <= 25
    )
    out = jsonl(client.files.content(done.output_file_id).text)
    errors = jsonl(client.files.content(done.error_file_id).text)
    assert len(out) == counts.completed and len(errors) == counts.failed
    assert {r["response"]["status_code"] for r in out} == {200}
    assert json.loads(out[0]["response"]["body"]["choices"][0]["message"]["content"])["choice"] in (
        "Continue",
        "Stop",
    )
    assert {r["response"]["status_code"] for r in errors} == {500} and errors[0]["error"] is None
    assert errors[0]["response"]["body"]["error"]["type"] == "server_error"
    assert sorted(r["custom_id"] for r in out + errors) == sorted(f"t{i}" for i in range(40))
    assert set(server.log.batch_items.values()) == {1} and len(server.log.batch_items) == 40
    assert server.log.batches["openai"] == 1 and server.log.uploads[0][0] == file_id


def test_openai_expiry_writes_batch_expired_lines_to_the_error_file(emulator):
    server = emulator(batch=BatchBehaviour(expire=1.0))
    client = openai_client(server)
    batch = client.batches.create(
        input_file_id=upload(client, 5), endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = until(
        lambda: client.batches.retrieve(batch.id),
        lambda b: b.status not in ("in_progress", "finalizing"),
    )
    assert done.status == "expired" and done.output_file_id is None and done.expired_at
    lines = jsonl(client.files.content(done.error_file_id).text)
    assert [r["error"]["code"] for r in lines] == ["batch_expired"] * 5
    assert all(r["response"] is None for r in lines)
    assert not server.log.batch_items  # nothing was answered


def test_openai_list_pages_newest_first_and_cancel(emulator):
    server = emulator(batch=BatchBehaviour(processing_s=60))
    client = openai_client(server)
    ids = [
        client.batches.create(
            input_file_id=upload(client, 2),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        ).id
        for _ in range(3)
    ]
    page = client.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[:0:-1] and page.has_more
    assert [b.id for b in client.batches.list(limit=2)] == ids[::-1]  # the SDK follows `after`
    assert client.batches.cancel(ids[0]).status == "cancelling"
    assert client.batches.retrieve(ids[0]).status == "cancelled"
    assert client.batches.retrieve(ids[1]).status == "in_progress"
    assert not server.log.batch_items


def test_openai_validation_failures(emulator):
    server = emulator()
    client = openai_client(server)
    batch = client.batches.create(
        input_file_id=upload(client, 0, ids=["a", "a"]),
        endpoint="/v1/chat/completions",
        completion_window="24h",
    )
    assert batch.status == "failed" and batch.errors.data[0].code == "duplicate_custom_id"
    assert client.batches.retrieve(batch.id).status == "failed"
    with pytest.raises(openai.NotFoundError):
        client.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        )
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")


def test_openai_limit_on_requests(emulator, monkeypatch):
    monkeypatch.setattr(batch_openai, "OPENAI_MAX", (3, 200 * 2**20))
    client = openai_client(emulator())
    batch = client.batches.create(
        input_file_id=upload(client, 4), endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status == "failed" and batch.errors.data[-1].code == "too_many_requests"


def anthropic_requests(n: int) -> list[dict]:
    return [{"custom_id": f"t{i}", "params": chat(i)} for i in range(n)]


def test_anthropic_sdk_round_trip_with_errors_and_expiry(emulator):
    server = emulator(batch=BatchBehaviour(item_errors=0.3, expire=0.2))
    client = anthropic_client(server)
    batch = client.messages.batches.create(requests=anthropic_requests(50))
    assert batch.processing_status == "in_progress" and batch.request_counts.processing == 50
    assert batch.results_url is None and batch.expires_at > batch.created_at
    done = until(
        lambda: client.messages.batches.retrieve(batch.id), lambda b: b.processing_status == "ended"
    )
    c = done.request_counts
    assert (
        c.processing == 0
        and c.succeeded + c.errored + c.expired == 50
        and c.errored
        and c.expired
        and c.succeeded
    )
    results = list(client.messages.batches.results(batch.id))
    kinds = {}
    for r in results:
        kinds.setdefault(r.result.type, []).append(r)
    assert {k: len(v) for k, v in kinds.items()} == {
        "succeeded": c.succeeded,
        "errored": c.errored,
        "expired": c.expired,
    }
    assert kinds["succeeded"][0].result.message.content[0].text.startswith('{"choice"')
    assert kinds["errored"][0].result.error.error.type == "api_error"
    assert len(server.log.batch_items) == c.succeeded + c.errored
    assert set(server.log.batch_items.values()) == {1}


def test_anthropic_list_paging_and_cancel(emulator):
    server = emulator(batch=BatchBehaviour(processing_s=60))
    client = anthropic_client(server)
    ids = [client.messages.batches.create(requests=anthropic_requests(3)).id for _ in range(3)]
    page = client.messages.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[:0:-1] and page.has_more and page.last_id == ids[1]
    assert [b.id for b in client.messages.batches.list(limit=2)] == ids[::-1]
    assert [b.id for b in client.messages.batches.list(before_id=ids[0], limit=5).data] == ids[
        :0:-1
    ]
    assert client.messages.batches.cancel(ids[0]).processing_status == "canceling"
    ended = client.messages.batches.retrieve(ids[0])
    assert ended.processing_status == "ended" and ended.request_counts.canceled == 3
    assert {r.result.type for r in client.messages.batches.results(ids[0])} == {"canceled"}
    assert not server.log.batch_items


def test_anthropic_refusals_of_a_bad_batch(emulator, monkeypatch):
    server = emulator()
    client = anthropic_client(server)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.create(requests=[{"custom_id": "a b", "params": chat(0)}])
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.create(requests=[{"custom_id": "a", "params": chat(0)}] * 2)
    monkeypatch.setattr(batch_anthropic, "ANTHROPIC_MAX", (2, 256 * 2**20))
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.create(requests=anthropic_requests(3))
    monkeypatch.setattr(batch_anthropic, "ANTHROPIC_MAX", (100_000, 1000))
    with pytest.raises(anthropic.APIStatusError) as info:
        client.messages.batches.create(requests=anthropic_requests(30))
    assert info.value.status_code == 413 and info.value.body["error"]["type"] == "request_too_large"
    request = urllib.request.Request(
        server.url + "/v1/messages/batches", method="GET", headers={"x-api-key": "k"}
    )
    with pytest.raises(urllib.error.HTTPError) as no_version:
        urllib.request.urlopen(request)
    assert no_version.value.code == 400
    assert server.log.batches["anthropic"] == 0


def http(server, method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        server.url + path,
        method=method,
        headers={"x-goog-api-key": "g"},
        data=json.dumps(body).encode() if body is not None else None,
    )
    with urllib.request.urlopen(request) as r:
        return json.loads(r.read())


def gemini_batch(n: int, name: str = "b1") -> dict:
    return {
        "batch": {
            "display_name": name,
            "input_config": {
                "requests": {
                    "requests": [
                        {
                            "request": {
                                "contents": [
                                    {"role": "user", "parts": [{"text": f"{PROMPT} #{i}"}]}
                                ]
                            },
                            "metadata": {"key": f"t{i}"},
                        }
                        for i in range(n)
                    ]
                }
            },
        }
    }


def test_gemini_batch_mode_round_trip(emulator):
    server = emulator(batch=BatchBehaviour(item_errors=0.3))
    op = http(server, "POST", "/v1beta/models/gemini-test:batchGenerateContent", gemini_batch(30))
    assert op["name"].startswith("batches/") and op["metadata"]["state"] == "BATCH_STATE_PENDING"
    assert (
        op["metadata"]["displayName"] == "b1"
        and op["metadata"]["batchStats"]["requestCount"] == "30"
    )
    done = until(lambda: http(server, "GET", f"/v1beta/{op['name']}"), lambda o: o.get("done"))
    assert done["metadata"]["state"] == "BATCH_STATE_SUCCEEDED"
    items = done["response"]["inlinedResponses"]["inlinedResponses"]
    assert [i["metadata"]["key"] for i in items] == [f"t{i}" for i in range(30)]  # in input order
    ok = [i for i in items if "response" in i]
    failed = [i for i in items if "error" in i]
    assert ok and failed and failed[0]["error"]["code"] == 13  # google.rpc.Code INTERNAL
    assert ok[0]["response"]["modelVersion"] == "gemini-test"
    assert done["metadata"]["batchStats"]["failedRequestCount"] == str(len(failed))
    listed = http(server, "GET", "/v1beta/batches")
    assert [o["name"] for o in listed["operations"]] == [op["name"]] and "response" not in listed[
        "operations"
    ][0]


def test_gemini_list_pages_cancel_and_expiry(emulator):
    server = emulator(batch=BatchBehaviour(processing_s=60))
    names = [
        http(server, "POST", "/v1beta/models/g:batchGenerateContent", gemini_batch(2, f"b{i}"))[
            "name"
        ]
        for i in range(3)
    ]
    first = http(server, "GET", "/v1beta/batches?pageSize=2")
    rest = http(server, "GET", f"/v1beta/batches?pageSize=2&pageToken={first['nextPageToken']}")
    assert [o["name"] for o in first["operations"] + rest["operations"]] == names[::-1]
    assert "nextPageToken" not in rest
    assert http(server, "POST", f"/v1beta/{names[0]}:cancel") == {}
    cancelled = http(server, "GET", f"/v1beta/{names[0]}")
    assert cancelled["metadata"]["state"] == "BATCH_STATE_CANCELLED" and cancelled["done"]
    assert "response" not in cancelled
    server.config.batch = BatchBehaviour(expire=1.0)
    op = http(server, "POST", "/v1beta/models/g:batchGenerateContent", gemini_batch(4))
    expired = http(server, "GET", f"/v1beta/{op['name']}")
    assert expired["metadata"]["state"] == "BATCH_STATE_EXPIRED" and "response" not in expired
    assert not server.log.batch_items


def test_the_respondent_hook_answers_online_and_batch_alike(emulator):
    seen = []

    def respondent(protocol: str, body: dict) -> str:
        seen.append(protocol)
        return '{"choice": "%s"}' % body["messages"][-1]["content"][-1]

    server = emulator(respondent=respondent)
    client = openai_client(server)
    online = client.chat.completions.create(**chat(7)).choices[0].message.content
    batch = client.batches.create(
        input_file_id=upload(client, 8), endpoint="/v1/chat/completions", completion_window="24h"
    )
    done = until(lambda: client.batches.retrieve(batch.id), lambda b: b.status == "completed")
    out = {
        r["custom_id"]: r["response"]["body"]["choices"][0]["message"]["content"]
        for r in jsonl(client.files.content(done.output_file_id).text)
    }
    assert online == out["t7"] == '{"choice": "7"}'
    assert seen == ["openai"] * 9


def test_a_lost_reply_after_the_batch_was_created(emulator):
    server = emulator(batch=BatchBehaviour(drop_replies={"create": 1}))
    client = anthropic_client(server)
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.batches.create(requests=anthropic_requests(2))
    assert server.log.batches["anthropic"] == 1  # it exists, though the client never heard
    assert [
        b.request_counts.processing + b.request_counts.succeeded
        for b in client.messages.batches.list()
    ] == [2]


def test_array_member_reads_one_element_at_a_time():
    text = ' { "a" : [1, {"x": "]"}], "requests" : [ {"custom_id": "q"} , [2] ] , "z": null } '
    assert list(array_member(text, "requests")) == [{"custom_id": "q"}, [2]]
    assert list(array_member('{"requests": []}', "requests")) == []
    with pytest.raises(ValueError):
        list(array_member('{"requests": [1 2]}', "requests"))

"""The viewer against what a careful user's security team tries (issue 31, item 8): a Host
that only starts like ours, a page number past any run, the headers that keep the page its
own, and an answer of 100 MB, listed by its start and shown a megabyte at a time."""

from __future__ import annotations

import urllib.error
import urllib.request

import orjson
import pytest

from tests.test_viewer_api import Served, _make, _records


@pytest.fixture(scope="module")
def huge(tmp_path_factory):
    """A run whose first answer is 100 MB long (and a reasoning of 3 MB beside it)."""
    run_dir = _make(tmp_path_factory.mktemp("huge"), "r1")
    lines = (run_dir / "results.ndjson").read_bytes().splitlines()
    first = orjson.loads(lines[0])
    first["response"]["raw"] = "x" * (100 << 20)
    first["response"]["reasoning"] = "r" * (3 << 20)
    lines[0] = orjson.dumps(first)
    (run_dir / "results.ndjson").write_bytes(b"\n".join(lines) + b"\n")
    served = Served(run_dir)
    served.run_dir = run_dir
    yield served, first["taskId"]
    served.close()


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8000@evil.example", "127.0.0.1.evil.example", "localhost:1:2"]
)
def test_a_host_that_only_starts_like_ours_is_refused(huge, host):
    served, _ = huge
    request = urllib.request.Request(served.viewer.url + "api/overview", headers={"Host": host})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=30)
    assert info.value.code == 403


def test_a_page_past_any_run_is_a_400_not_a_500(huge):
    served, _ = huge
    for page in ("99999999999999999999", str(10**12)):
        status, body = served.get("/api/answers", page=page)
        assert status == 400 and "page" in body["error"]


def test_every_answer_carries_the_headers_that_keep_the_page_its_own(huge):
    served, _ = huge
    for path in ("", "api/overview", "static/app.js", "api/nothing"):
        try:
            resp = urllib.request.urlopen(served.viewer.url + path, timeout=30)
        except urllib.error.HTTPError as exc:
            resp = exc
        assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"]
        assert resp.headers["X-Content-Type-Options"] == "nosniff"


def test_a_100_mb_answer_is_listed_by_its_start_and_paged_in_its_detail(huge):
    served, task_id = huge
    page = served.ok("/api/answers", size="50")
    row = next(r for r in page["rows"] if r["taskId"] == task_id)
    assert row["raw"] == "x" * 200
    first = served.ok(f"/api/answer/{task_id}")
    assert len(first["record"]["response"]["raw"]) == 1 << 20
    assert first["parts"]["raw"] == {"part": 1, "parts": 100}
    assert first["parts"]["reasoning"] == {"part": 1, "parts": 3}
    assert "reasoning" not in (first["parsed"] or {})  # the trace is no parsed answer
    last = served.ok(f"/api/answer/{task_id}", part="100")
    assert len(last["record"]["response"]["raw"]) == 1 << 20 and last["parts"]["raw"]["part"] == 100
    for past in ("0", "101"):
        status, body = served.get(f"/api/answer/{task_id}", part=past)
        assert status == 400 and "part" in body["error"]
    others = [r for r in _records(served.run_dir) if r["taskId"] != task_id][:1]
    assert served.ok(f"/api/answer/{others[0]['taskId']}")["parts"] == {}

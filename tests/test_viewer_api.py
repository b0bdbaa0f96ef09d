"""`orchestrator view`'s JSON API (docs/viewer.md) over real simulated runs, served by the real
server on a loopback port: its counts against `status`'s and `analyze`'s, its filters against
polars counts made here from the results file, its messages against the plan's."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.conftest import ROOT, cli, run_quietly, write_config

CONFIG = """
name = "viewed"
jobs = ["paired"]
samples = 6
seed = 11
run_id = "{run_id}"
output_dir = "{out}"
[[models]]
provider = "simulated"
name = "sim-a"
temperature = 1.0
[models.simulate]
parse_error_rate = 0.1
refusal_rate = 0.1
[[models]]
provider = "simulated"
name = "sim-b"
temperature = 1.0
[models.simulate]
parse_error_rate = 0.05
"""


def _make(folder: Path, run_id: str) -> Path:
    config = write_config(
        folder, CONFIG.format(run_id=run_id, out=folder / "runs"), f"{run_id}.toml"
    )
    return run_quietly(config).run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.mktemp("view"), "r1")


class Served:
    """The viewer of a folder on 127.0.0.1, port 0, in a thread of its own."""

    def __init__(self, folder: Path) -> None:
        from orchestrator.viewer.server import Viewer, open_target

        data, campaign = open_target(folder)
        self.loop = asyncio.new_event_loop()
        self.viewer = Viewer(data, campaign)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.viewer.start(0), self.loop).result(30)

    def get(self, path: str, **query) -> tuple[int, dict]:
        url = (
            self.viewer.url.rstrip("/")
            + path
            + ("?" + urllib.parse.urlencode(query) if query else "")
        )
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            assert exc.headers["Content-Type"].startswith("application/json")
            return exc.code, json.loads(exc.read())

    def ok(self, path: str, **query) -> dict:
        status, body = self.get(path, **query)
        assert status == 200, body
        return body

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.viewer.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def served(run_dir):
    s = Served(run_dir)
    yield s
    s.close()


def _records(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


def _frame(run_dir: Path) -> pl.DataFrame:
    """The results file as polars reads it here, apart from the viewer (every line is final:
    the simulated respondent never fails a call)."""
    df = pl.read_ndjson(run_dir / "results.ndjson", infer_schema_length=None)
    assert df["taskId"].n_unique() == df.height and "failed" not in df["status"].to_list()
    return df


def _plan_messages(run_dir: Path) -> dict[str, tuple]:
    from orchestrator.plan import Plan
    from orchestrator.session import campaign_of_run

    return {t.task_id: t.cell.messages for t in Plan(campaign_of_run(run_dir)).tasks()}


def test_the_overview_counts_what_status_and_analyze_count(run_dir, served):
    from orchestrator.analysis.effects import EFFECT_SCHEMA
    from orchestrator.engine.status import tally
    from orchestrator.nightly.effects import run_effects

    body = served.ok("/api/overview")
    counts, paid, note = tally(run_dir / "results.ndjson")
    assert note is None and body["note"] is None
    total: dict[str, int] = {}
    for (_, s), n in counts.items():
        total[s] = total.get(s, 0) + n
    assert body["statusCounts"] == total and {"ok", "parse_error", "refused"} <= set(total)
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert [m["key"] for m in body["models"]] == list(manifest["plan"]["per_model"])
    for m in body["models"]:
        assert m["byStatus"] == {s: n for (k, s), n in counts.items() if k == m["key"]}
        assert (
            m["done"]
            == sum(m["byStatus"].values())
            == m["tasks"]
            == manifest["plan"]["per_model"][m["key"]]
        )
        assert m["pending"] == 0 and m["spendUsd"] == paid[m["key"]][1]
        assert m["label"] == manifest["models"][m["key"]] and m["settings"]["name"] in (
            "sim-a",
            "sim-b",
        )
    assert body["run"]["tasks"] == manifest["plan"]["tasks"] and body["run"]["seed"] == 11
    expected = run_effects(run_dir).effects.select(list(EFFECT_SCHEMA))
    assert expected.height > 0
    # polars sums in parallel: two analyses of one run agree to the last few bits only
    assert_frame_equal(
        pl.DataFrame(body["effects"], schema=EFFECT_SCHEMA), expected, rel_tol=1e-9, abs_tol=1e-12
    )


def test_every_filter_counts_what_polars_counts_in_the_file(run_dir, served):
    df = _frame(run_dir).with_columns(study=pl.lit("paired"))
    facets = served.ok("/api/facets")
    columns = {
        "study": "study",
        "experiment": "experimentSlug",
        "variant": "variant",
        "strategy": "strategy",
        "status": "status",
    }
    for name, column in columns.items():
        assert facets[name] == sorted(df[column].unique().to_list())
        for value in facets[name]:
            assert (
                served.ok("/api/answers", **{name: value})["total"]
                == df.filter(pl.col(column) == value).height
            )
    for model in facets["model"]:
        assert (
            served.ok("/api/answers", model=model["key"])["total"]
            == df.filter(pl.col("modelKey") == model["key"]).height
        )
    for c in facets["condition"]:
        want = df.filter(
            pl.col("experimentSlug") == c["experiment"], pl.col("conditionIndex") == c["index"]
        ).height
        assert (
            served.ok("/api/answers", experiment=c["experiment"], condition=c["index"])["total"]
            == want
        )
        assert c["label"]
    key = facets["model"][0]["key"]
    both = served.ok("/api/answers", model=key, status="refused")
    assert (
        both["total"]
        == df.filter(pl.col("modelKey") == key, pl.col("status") == "refused").height
        > 0
    )
    assert all(r["status"] == "refused" and r["modelKey"] == key for r in both["rows"])
    assert served.ok("/api/answers", status="no-such-status")["total"] == 0


def test_pages_cover_every_record_once_in_file_order(run_dir, served):
    ids = [r["taskId"] for r in _records(run_dir)]
    seen, page = [], 1
    while True:
        body = served.ok("/api/answers", page=page, size=7)
        assert body["total"] == len(ids) and body["page"] == page and body["size"] == 7
        if not body["rows"]:
            break
        assert len(body["rows"]) <= 7
        seen += [r["taskId"] for r in body["rows"]]
        page += 1
    assert seen == ids and page == -(-len(ids) // 7) + 1
    row = served.ok("/api/answers", size=1)["rows"][0]
    first = _records(run_dir)[0]
    raw = first["response"].get("raw")  # a failed call's record holds no raw text
    assert row["taskId"] == first["taskId"] and row["conditionLabel"]
    assert row["raw"] == (raw[:200] if raw is not None else None)
    assert served.get("/api/answers", size=0)[0] == 400
    status, body = served.get("/api/answers", condition="x")
    assert status == 400 and "condition" in body["error"] and body["fix"]


def _expected_q(run_dir: Path, q: str) -> int:
    messages = _plan_messages(run_dir)
    needle = q.lower()
    return sum(
        needle in ((r["response"].get("raw") or "").lower())
        or any(needle in m["content"].lower() for m in messages[r["taskId"]])
        for r in _records(run_dir)
    )


def test_free_text_finds_answers_and_prompts(run_dir, served):
    records = _records(run_dir)
    # in answers only: a word of one raw answer that no prompt holds
    messages = _plan_messages(run_dir)
    prompts = " ".join({m["content"].lower() for ms in messages.values() for m in ms})
    words = {
        w.strip('.,{}":') for r in records for w in (r["response"].get("raw") or "").lower().split()
    }
    in_answers = sorted(w for w in words if len(w) > 4 and w not in prompts)[0]
    got = served.ok("/api/answers", q=in_answers.upper(), size=500)
    assert 0 < got["total"] == _expected_q(run_dir, in_answers)
    assert all(in_answers in r["raw"].lower() for r in got["rows"] if len(r["raw"]) < 200)
    # in prompts only: a phrase of one experiment's prompt
    first = records[0]
    user = [m for m in messages[first["taskId"]] if m["role"] == "user"][0]["content"]
    phrase = user.split(".")[0][:40]
    got = served.ok("/api/answers", q=phrase, size=500)
    assert 0 < got["total"] == _expected_q(run_dir, phrase) < len(records)
    assert first["taskId"] in {r["taskId"] for r in got["rows"]}
    # with a filter too
    got = served.ok("/api/answers", q=phrase, status="ok")
    assert got["total"] == sum(
        1
        for r in records
        if r["status"] == "ok"
        and any(phrase.lower() in m["content"].lower() for m in messages[r["taskId"]])
        or (r["status"] == "ok" and phrase.lower() in (r["response"].get("raw") or "").lower())
    )


def test_an_opened_result_is_its_record_with_the_plans_messages(run_dir, served):
    messages = _plan_messages(run_dir)
    records = _records(run_dir)
    for rec in (
        records[0],
        records[len(records) // 2],
        records[-1],
        next(r for r in records if r["status"] == "parse_error"),
    ):
        body = served.ok(f"/api/answer/{rec['taskId']}")
        assert body["record"] == json.loads(json.dumps(rec))
        assert body["messages"] == [dict(m) for m in messages[rec["taskId"]]] and body["messages"]
        assert body["study"] == "paired" and body["conditionLabel"]
        parsed = {k: v for k, v in rec["response"].items() if k != "raw"}
        assert body["parsed"] == (parsed or None)
    status, body = served.get("/api/answer/" + "0" * 32)
    assert status == 404 and "no result" in body["error"] and body["fix"]


def test_an_effect_shows_its_conditions_answers_side_by_side(run_dir, served):
    df = _frame(run_dir)
    effects = served.ok("/api/overview")["effects"]
    kinds = set()
    for row in effects:
        body = served.ok(
            "/api/effect",
            study=row["study"],
            measure=row["measure"],
            experiment=row["experiment"],
            strategy=row["strategy"],
            model=row["modelKey"],
        )
        assert body["effect"] == row
        part = df.filter(
            pl.col("experimentSlug") == row["experiment"],
            pl.col("modelKey") == row["modelKey"],
            pl.col("strategy") == row["strategy"],
        )
        assert [c["index"] for c in body["conditions"]] == sorted(
            part["conditionIndex"].unique().to_list()
        )
        values = part["response"].struct.field("value")
        numeric = (
            part["response"].struct.field("choice").null_count() == part.height
            and values.drop_nulls().n_unique() > 20
        )
        kinds.add(numeric)
        if numeric:  # counted in the same ten bins for every condition, side by side
            assert (
                len({tuple(d["answer"] for d in c["distribution"]) for c in body["conditions"]})
                == 1
            )
            low, high = values.min(), values.max()
            edges = [low + i * (high - low) / 10 for i in range(10)] + [high]
        for c in body["conditions"]:
            mine = part.filter(pl.col("conditionIndex") == c["index"])
            assert [r["taskId"] for r in c["rows"]] == mine["taskId"].head(20).to_list()
            if numeric:
                v = mine["response"].struct.field("value")
                want = [
                    int(((v >= lo) & ((v <= hi) if i == 9 else (v < hi))).sum())
                    for i, (lo, hi) in enumerate(zip(edges, edges[1:]))
                ]
                shown = [d["count"] for d in c["distribution"] if d["answer"] is not None]
                assert (
                    shown == want
                    and sum(d["count"] for d in c["distribution"]) == c["total"] == mine.height
                )
                continue
            answers = mine.select(
                pl.col("response")
                .struct.field("choice")
                .fill_null(pl.col("response").struct.field("value").cast(pl.String))
                .alias("answer")
            )
            counts = dict(answers.group_by("answer").len().iter_rows())
            assert c["total"] == mine.height == sum(counts.values())
            assert all(counts[d["answer"]] == d["count"] for d in c["distribution"])
            assert len(c["distribution"]) == min(20, len(counts))
            assert [d["count"] for d in c["distribution"]] == sorted(counts.values(), reverse=True)[
                :20
            ]
    assert False in kinds
    status, body = served.get(
        "/api/effect",
        study="paired",
        measure="none",
        experiment="x",
        strategy="baseline",
        model="nope",
    )
    assert status == 404 and body["error"]


def test_an_effect_may_be_named_by_fewer_parameters_when_they_name_one(run_dir, served):
    """A parameter left out matches any value: study, experiment and model name one effect of
    the paired study (its measure and strategy follow); study and model alone name several,
    and the 400 names the parameters that tell them apart, with their values."""
    effects = served.ok("/api/overview")["effects"]
    row = effects[0]
    full = served.ok(
        "/api/effect",
        study=row["study"],
        measure=row["measure"],
        experiment=row["experiment"],
        strategy=row["strategy"],
        model=row["modelKey"],
    )
    short = served.ok(
        "/api/effect", study=row["study"], experiment=row["experiment"], model=row["modelKey"]
    )
    assert short == full and short["effect"] == row and short["scope"] == "experiment"
    status, body = served.get("/api/effect", study=row["study"], model=row["modelKey"])
    mine = [e for e in effects if e["study"] == row["study"] and e["modelKey"] == row["modelKey"]]
    assert status == 400 and f"{len(mine)} effects" in body["error"], body
    said = body["error"] + " " + body["fix"]
    assert "experiment" in said and all(e["experiment"] in said for e in mine)
    assert "strategy" not in body["error"]  # one strategy: it tells none apart
    status, body = served.get("/api/effect", experiment=row["experiment"])
    assert status == 400 and "study" in body["error"] and "model" in body["error"]
    assert row["modelKey"] in body["fix"] and "paired" in body["fix"]
    status, body = served.get(
        "/api/effect", study=row["study"], experiment="no-such", model=row["modelKey"]
    )
    assert status == 404 and body["error"]


def test_study_and_model_alone_open_a_runs_only_effect(tmp_path):
    """The docs' minimal request: in a run of one experiment and one model, study and model
    name its one effect."""
    spec = json.loads((ROOT / "jobs" / "paired.json").read_text())
    spec["experiments"] = spec["experiments"][:1]
    (tmp_path / "one.json").write_text(json.dumps(spec))
    config = write_config(
        tmp_path,
        f"""
        name = "one"
        jobs = ["{tmp_path / "one.json"}"]
        samples = 4
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim-a"
        temperature = 1.0
        """,
    )
    s = Served(run_quietly(config).run_dir)
    try:
        (row,) = s.ok("/api/overview")["effects"]
        got = s.ok("/api/effect", study=row["study"], model=row["modelKey"])
        assert got["effect"] == row and len(got["conditions"]) == 2
        assert all(c["total"] and c["label"] for c in got["conditions"])
    finally:
        s.close()


def _documented(route: str) -> str:
    """The row of docs/viewer.md's table of routes for this route."""
    text = (ROOT / "docs" / "viewer.md").read_text()
    return next(line for line in text.splitlines() if line.startswith(f"| `GET {route}` |"))


def test_the_docs_name_every_field_each_route_answers(run_dir, served):
    row = served.ok("/api/overview")["effects"][0]
    answers = {
        "/api/overview": served.ok("/api/overview"),
        "/api/facets": served.ok("/api/facets"),
        "/api/answers": served.ok("/api/answers"),
        "/api/answer/TASK_ID": served.ok(f"/api/answer/{_records(run_dir)[0]['taskId']}"),
        "/api/effect": served.ok(
            "/api/effect", study=row["study"], experiment=row["experiment"], model=row["modelKey"]
        ),
    }
    for route, body in answers.items():
        words = set(re.findall(r"\w+", _documented(route)))
        assert set(body) <= words, f"{route}: {sorted(set(body) - words)} not in docs/viewer.md"
    assert "?part=" in _documented("/api/answer/TASK_ID")


def test_numeric_answers_of_an_effect_are_counted_in_shared_bins(tmp_path):
    """More distinct numbers than a list can show: both conditions over the same ten bins."""
    config = write_config(
        tmp_path,
        CONFIG.format(run_id="big", out=tmp_path / "runs").replace("samples = 6", "samples = 15"),
        "big.toml",
    )
    run_dir = run_quietly(config).run_dir
    s = Served(run_dir)
    try:
        row = next(
            e
            for e in s.ok("/api/overview")["effects"]
            if e["experiment"] == "anchoring-first-number"
        )
        body = s.ok(
            "/api/effect",
            study=row["study"],
            measure=row["measure"],
            experiment=row["experiment"],
            strategy=row["strategy"],
            model=row["modelKey"],
        )
    finally:
        s.close()
    df = _frame(run_dir).filter(
        pl.col("experimentSlug") == "anchoring-first-number", pl.col("modelKey") == row["modelKey"]
    )
    v = df["response"].struct.field("value")
    assert v.drop_nulls().n_unique() > 20
    low, high = v.min(), v.max()
    edges = [low + i * (high - low) / 10 for i in range(10)] + [high]
    assert len({tuple(d["answer"] for d in c["distribution"]) for c in body["conditions"]}) == 1
    for c in body["conditions"]:
        mine = df.filter(pl.col("conditionIndex") == c["index"])["response"].struct.field("value")
        want = [
            int(((mine >= lo) & ((mine <= hi) if i == 9 else (mine < hi))).sum())
            for i, (lo, hi) in enumerate(zip(edges, edges[1:]))
        ]
        assert [d["count"] for d in c["distribution"] if d["answer"] is not None] == want
        assert sum(d["count"] for d in c["distribution"]) == c["total"] == mine.len()


def test_a_torn_last_line_is_left_out_and_said_so(run_dir, tmp_path, served):
    copy = tmp_path / "torn"
    shutil.copytree(run_dir, copy)
    with open(copy / "results.ndjson", "ab") as f:
        f.write(b'{"taskId":"abc","status":"ok","mod')
    before = served.ok("/api/overview")
    s = Served(copy)
    try:
        body = s.ok("/api/overview")
        assert body["note"] and "torn" in body["note"]
        assert body["statusCounts"] == before["statusCounts"]
        assert_frame_equal(
            pl.DataFrame(body["effects"]),
            pl.DataFrame(before["effects"]),
            rel_tol=1e-9,
            abs_tol=1e-12,
        )
        assert s.ok("/api/answers")["total"] == len(_records(run_dir))
    finally:
        s.close()


def test_a_run_still_going_is_read_again_as_it_grows(run_dir, tmp_path):
    copy = tmp_path / "going"
    shutil.copytree(run_dir, copy)
    lines = (run_dir / "results.ndjson").read_bytes().splitlines(keepends=True)
    (copy / "results.ndjson").write_bytes(b"".join(lines[:-10]))
    s = Served(copy)
    try:
        first = s.ok("/api/overview")
        assert sum(m["pending"] for m in first["models"]) == 10
        with open(copy / "results.ndjson", "ab") as f:
            f.write(b"".join(lines[-10:]))
        deadline = time.monotonic() + 30  # read again within RELOAD_MIN_S of the last read
        while (
            sum(m["pending"] for m in s.ok("/api/overview")["models"])
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert sum(m["pending"] for m in s.ok("/api/overview")["models"]) == 0
        assert s.ok("/api/answers")["total"] == len(lines)
        assert s.ok(f"/api/answer/{orjson.loads(lines[-1])['taskId']}")["record"] == json.loads(
            lines[-1]
        )
    finally:
        s.close()


def test_a_growing_file_is_not_read_again_on_every_request(run_dir, tmp_path, monkeypatch):
    """While a run appends, requests are served from the last read until the reload wait is
    over (a 1M-record file takes seconds to read)."""
    from orchestrator.viewer import data

    monkeypatch.setattr(data, "RELOAD_MIN_S", 3600.0)
    copy = tmp_path / "going"
    shutil.copytree(run_dir, copy)
    lines = (run_dir / "results.ndjson").read_bytes().splitlines(keepends=True)
    (copy / "results.ndjson").write_bytes(b"".join(lines[:-10]))
    s = Served(copy)
    try:
        assert s.ok("/api/answers")["total"] == len(lines) - 10
        with open(copy / "results.ndjson", "ab") as f:
            f.write(b"".join(lines[-10:]))
        assert s.ok("/api/answers")["total"] == len(lines) - 10  # the last read, not a new one
    finally:
        s.close()


def test_history_is_for_campaign_folders(run_dir, served, tmp_path):
    status, body = served.get("/api/history")
    assert status == 404 and body["error"] == "not a campaign folder"
    _make(tmp_path, "n1")
    second = _make(tmp_path, "n2")
    s = Served(tmp_path / "runs" / "viewed")
    try:
        assert s.ok("/api/overview")["run"]["runId"] == "n2" == second.name
        body = s.ok("/api/history")
        assert [r["run"] for r in body["runs"]] == ["n1", "n2"]
        assert body["comparison"]["a"]["runId"] == "n1" and body["comparison"]["b"]["runId"] == "n2"
    finally:
        s.close()


def test_missing_static_files_are_a_json_404(served, monkeypatch, tmp_path):
    from orchestrator.viewer import server

    monkeypatch.setattr(server, "STATIC", tmp_path / "static")
    (tmp_path / "static").mkdir()
    (tmp_path / "secret.txt").write_text("not for the page")
    status, body = served.get("/")
    assert status == 404 and "index.html" in body["error"] and body["fix"]
    status, body = served.get("/static/..%2Fsecret.txt")  # aiohttp decodes %2F into the name
    assert status == 404 and "not for the page" not in json.dumps(body)


def test_a_page_of_another_host_is_refused(served):
    """DNS rebinding: a page elsewhere whose name resolves to 127.0.0.1 sends its own Host."""
    request = urllib.request.Request(
        served.viewer.url + "api/overview", headers={"Host": "evil.example:80"}
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=30)
    assert info.value.code == 403 and "127.0.0.1 only" in json.loads(info.value.read())["error"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_folder_that_is_not_a_run_exits_2_with_nothing_written(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    before = _snapshot(tmp_path)
    done = cli("view", str(tmp_path), "--port", "0", cwd=tmp_path, timeout=60)
    said = " ".join(done.stderr.split())  # rich wraps long lines
    assert done.returncode == 2 and "not a run folder" in said and "Traceback" not in said
    assert _snapshot(tmp_path) == before


def test_a_port_in_use_exits_2_naming_it(run_dir, tmp_path):
    before = _snapshot(run_dir)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("view", str(run_dir), "--port", str(port), cwd=tmp_path, timeout=60)
    said = " ".join(done.stderr.split())  # rich wraps long lines
    assert done.returncode == 2 and f"127.0.0.1:{port}" in said and "--port 0" in said
    assert "Traceback" not in done.stderr and "viewer:" not in done.stdout
    assert _snapshot(run_dir) == before


def test_the_command_prints_its_address_and_serves_until_interrupted(run_dir, tmp_path):
    import signal
    import subprocess
    import sys

    # a process of its own: the viewer serves until Ctrl-C (SIGINT), and how it ends is the test
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "view", str(run_dir), "--port", "0"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("viewer: http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[1]
        with urllib.request.urlopen(url + "api/overview", timeout=60) as resp:
            body = json.loads(resp.read())
        assert body["run"]["runId"] == run_dir.name
        try:
            urllib.request.urlopen(url + "api/nothing-here", timeout=60)
        except urllib.error.HTTPError as exc:
            assert exc.code == 404 and json.loads(exc.read())["error"]
        else:
            raise AssertionError("an unknown path answered 200")
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    assert code == 0 and "Traceback" not in proc.stderr.read()


def test_a_failed_attempt_a_resume_superseded_is_not_listed(run_dir, tmp_path):
    """A task's final record is its first terminal one (engine/status.py), not the failed
    attempt before it; a task that only failed is listed by its last failed line."""
    from orchestrator.engine.status import tally

    copy = tmp_path / "retried"
    shutil.copytree(run_dir, copy)
    records = _records(run_dir)
    first, second = dict(records[0]), dict(records[1])
    first.update(status="failed", error="HTTP 500")
    lost = dict(second, taskId="f" * 32, status="failed", error="HTTP 500 again")
    lines = [orjson.dumps(r) + b"\n" for r in [first, *records, dict(lost, error="HTTP 500"), lost]]
    (copy / "results.ndjson").write_bytes(b"".join(lines))
    s = Served(copy)
    try:
        assert s.ok("/api/answers")["total"] == len(records) + 1
        assert s.ok(f"/api/answer/{first['taskId']}")["record"]["status"] == records[0]["status"]
        assert s.ok(f"/api/answer/{'f' * 32}")["record"]["error"] == "HTTP 500 again"
        counts, _, _ = tally(copy / "results.ndjson")
        total: dict[str, int] = {}
        for (_, st), n in counts.items():
            total[st] = total.get(st, 0) + n
        assert s.ok("/api/overview")["statusCounts"] == total and total["failed"] == 1
    finally:
        s.close()


def test_each_record_gets_its_cells_id_by_hash_or_by_the_join(run_dir, monkeypatch):
    """The cell ids (what a prompt search matches) are those a join on the cell fields gives,
    also on the join itself, taken should two cells' fields ever hash alike."""
    from orchestrator.viewer.cells import CELL_FIELDS
    from orchestrator.viewer.data import RunData

    data = RunData.open(run_dir)
    by_hash = data.loaded().frame
    table = data.cells.table()
    joined = by_hash.drop("cell").join(
        table, on=CELL_FIELDS, how="left", nulls_equal=True, maintain_order="left"
    )
    assert by_hash["cell"].null_count() == 0 and table.height > 4
    assert by_hash["cell"].to_list() == joined["cell"].to_list()
    joins = []
    join = pl.DataFrame.join
    monkeypatch.setattr(pl.DataFrame, "join", lambda *a, **k: joins.append(1) or join(*a, **k))
    monkeypatch.setattr(pl.Series, "n_unique", lambda self: 1)  # as if every hash were one
    fallback = RunData.open(run_dir).loaded().frame
    assert joins and fallback["cell"].to_list() == by_hash["cell"].to_list()


def test_a_live_runs_next_read_takes_only_the_appended_lines(run_dir, tmp_path, monkeypatch):
    """A run going on appends: new tasks, a terminal record after a failed one, a duplicate
    terminal one and a later failed attempt of a finished task. The next read parses only those
    lines, and the frame and spend it gives are those a fresh read of the whole log gives."""
    from orchestrator.viewer import listing
    from orchestrator.viewer.data import RunData

    copy = tmp_path / "going"
    shutil.copytree(run_dir, copy)
    log = copy / "results.ndjson"
    lines = log.read_bytes().splitlines(keepends=True)
    records_ = [orjson.loads(line) for line in lines]
    done = records_[0]
    failed = records_[1] | {"status": "failed", "response": None, "costUsd": 0.25}
    log.write_bytes(b"".join(lines[2:-10]) + orjson.dumps(failed) + b"\n")
    live = RunData.open(copy)
    before = live.loaded()
    assert records_[1]["taskId"] in before.frame["taskId"].to_list()  # its failed record

    read = []
    new_rows = listing.read
    monkeypatch.setattr(listing, "read", lambda lf: read.append(r := new_rows(lf)) or r)
    monkeypatch.setattr(listing, "read_whole", lambda found: read.append(None) or [])
    appended = [
        *lines[-10:],
        lines[1],  # the failed task's terminal record
        lines[1],  # a duplicate of it
        orjson.dumps(done | {"costUsd": 0.5}) + b"\n",  # a task first recorded now
        orjson.dumps(records_[2] | {"status": "failed", "costUsd": 0.125}) + b"\n",
    ]
    with open(log, "ab") as f:
        f.write(b"".join(appended))
    live._next_load = 0.0
    after = live.loaded()
    assert [r.height for r in read] == [len(appended)]  # only the new lines were read
    monkeypatch.undo()

    fresh = RunData.open(copy).loaded()
    assert_frame_equal(after.frame, fresh.frame)
    assert after.spend == pytest.approx(fresh.spend)
    monkeypatch.setattr(listing, "READ_ROWS", 7)  # a whole log read a few rows at a time
    assert_frame_equal(RunData.open(copy).loaded().frame, fresh.frame)
    assert after.frame.height == len(lines)  # every task once


@pytest.mark.parametrize("how", ["replaced", "rewritten in place"])
def test_a_live_viewer_reads_a_changed_log_whole_after_another_reader_rebuilt(
    run_dir, tmp_path, how
):
    """A log replaced (another file, changed anywhere) or rewritten in place (changed near its
    end), whose snapshot a command rebuilt before the viewer's next read: the viewer's frame
    and spend are read again from the log as it is, not its old rows with the new ones after."""
    import os

    from orchestrator.engine.columnar import records
    from orchestrator.viewer.data import RunData

    copy = tmp_path / "going"
    shutil.copytree(run_dir, copy)
    log = copy / "results.ndjson"
    live = RunData.open(copy)
    live.loaded()
    lines = log.read_bytes().splitlines(keepends=True)
    at = len(lines) // 2 if how == "replaced" else len(lines) - 2
    changed = orjson.loads(lines[at]) | {"status": "refused", "costUsd": 9.0}
    lines[at] = orjson.dumps(changed) + b"\n"
    if how == "replaced":
        (copy / "new").write_bytes(b"".join(lines))
        os.replace(copy / "new", log)
    else:
        with open(log, "r+b") as f:
            f.write(b"".join(lines))
    records(log)  # a command: it sees the change and rebuilds the snapshot
    live._next_load = 0.0
    after = live.loaded()
    fresh = RunData.open(copy).loaded()
    assert_frame_equal(after.frame, fresh.frame)
    assert after.spend == pytest.approx(fresh.spend)
    row = after.frame.filter(pl.col("taskId") == changed["taskId"])
    assert row["status"].to_list() == ["refused"]

"""`make bench` part: `orchestrator view` of a 1,000,008-record run of the simulated
respondent's answers, served by the real server in a fresh process and asked over loopback:
the first load of the results, the first page, each filter alone, free text (in answers and
prompts), one opened result, and the overview (its effects are `analyze`'s), each asked twice."""

from __future__ import annotations

import tempfile
from pathlib import Path

CODE = """
import asyncio, json, threading, time, urllib.parse, urllib.request
from pathlib import Path
from orchestrator.viewer.server import Viewer, open_target
data, _ = open_target(Path({run!r}))
loop = asyncio.new_event_loop()
threading.Thread(target=loop.run_forever, daemon=True).start()
viewer = Viewer(data)
asyncio.run_coroutine_threadsafe(viewer.start(0), loop).result()

def get(path, **query):
    url = viewer.url.rstrip("/") + path + ("?" + urllib.parse.urlencode(query) if query else "")
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as resp:
        body = json.loads(resp.read())
    return time.perf_counter() - t0, body

t0 = time.perf_counter()
data.loaded()  # as `orchestrator view` does before it prints its address
load = time.perf_counter() - t0
print(f"reading the results (once per state of the file, before the address is printed) | {{load:.3f}} | |")
first, body = get("/api/answers")
print(f"first /api/answers page | {{first:.3f}} | {{get('/api/answers')[0]:.3f}} | total {{body['total']:,}}")
key = body["rows"][0]["modelKey"]
task = body["rows"][12345 % len(body["rows"])]["taskId"]
for name, value in (("study", "paired"), ("experiment", "anchoring-first-number"), ("condition", "1"),
                    ("variant", "v1"), ("strategy", "baseline"), ("model", key), ("status", "parse_error"),
                    ("q", "laptop"), ("q", "981."), ("q", "no-such-text")):
    a, body = get("/api/answers", **{{name: value}})
    b, _ = get("/api/answers", **{{name: value}}, page=3)
    print(f"{{name}}={{value}} | {{a:.3f}} | {{b:.3f}} (page 3) | total {{body['total']:,}}")
a, _ = get("/api/answer/" + task)
b, _ = get("/api/answer/" + task)
print(f"/api/answer/<taskId> | {{a:.3f}} | {{b:.3f}} |")
a, _ = get("/api/facets")
b, _ = get("/api/facets")
print(f"/api/facets | {{a:.3f}} | {{b:.3f}} |")
a, body = get("/api/overview")
b, _ = get("/api/overview")
print(f"/api/overview (its effects: an analysis, once per file state; `view` starts it once loaded) | {{a:.3f}} | {{b:.3f}} | {{len(body['effects'])}} effects")
elapsed = load
"""


def bench_view(samples: int = 83_334) -> None:
    from tests.bench import PEAK, _make_run, _peak_mb_of

    with tempfile.TemporaryDirectory() as tmp:
        _make_run(tmp, samples)
        run = Path(tmp) / "run"
        size = (run / "results.ndjson").stat().st_size / 1e6
        _, peak, anon, table = _peak_mb_of(CODE.format(run=str(run)) + PEAK)
        print(
            f"view of {12 * samples:,} result records ({size:.0f} MB of NDJSON), seconds per request "
            f"over loopback (target < 1 s for a page and each filter, once loaded):"
        )
        print("request | first call | second call | answer")
        print(table)
        print(f"peak heap {anon:.0f} MB, peak RSS {peak:.0f} MB (with the memory-mapped file)")

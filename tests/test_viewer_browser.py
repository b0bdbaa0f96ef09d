"""`orchestrator view` in a real browser (chromium, driven by playwright) on a simulated run
served by the real viewer server: what the page shows is checked against counts made here,
independently, with polars over the results file and with the status and effects code that
`orchestrator status` and `analyze` use. Skipped, with the reason, where no browser is installed."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import cli_process, run_quietly, write_config
from tests.viewer_browser import VIEWPORT, Served, launch, missing

pytestmark = pytest.mark.browser

CONFIG = """
name = "viewed"
jobs = ["paired"]
seed = 20261130
samples = 12
run_id = "r1"
output_dir = "{out}"

[[models]]
provider = "simulated"
name = "sim-a"
temperature = 1.0
[models.simulate]
parse_error_rate = 0.1
refusal_rate = 0.05
[models.simulate.effects.anchoring-first-number]
conditions = [{{mean = 1150, sd = 120}}, {{mean = 880, sd = 120}}]
[models.simulate.effects.decoy-subscription-choice]
conditions = [{{shares = {{"Pro — €14/month, 100 GB" = 0.45}}}}, {{shares = {{"Pro — €14/month, 100 GB" = 0.70}}}}]

[[models]]
provider = "simulated"
name = "sim-b"
temperature = 1.0
[models.simulate]
parse_error_rate = 0.02
"""
DECOY = "decoy-subscription-choice"


@pytest.fixture(scope="module", autouse=True)
def needs_browser():
    if why := missing():
        pytest.skip(f"browser tests skipped: {why}")


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("viewed")
    config = write_config(root, CONFIG.format(out=root / "runs"))
    run_quietly(config)
    return config, root / "runs" / "viewed" / "r1"


@pytest.fixture(scope="module")
def records(run) -> pl.DataFrame:
    """The results file, read here: no task failed, so each line is a task's final record."""
    df = pl.read_ndjson(run[1] / "results.ndjson")
    assert "failed" not in df["status"].to_list()
    return df.with_columns(
        pl.col("response").struct.field("raw").alias("raw"),
        pl.col("response").struct.field("choice").alias("choice"),
    )


@pytest.fixture(scope="module")
def viewer(run):
    served = Served(run[1])
    yield served.url
    served.stop()


@pytest.fixture(scope="module")
def browser(run):
    # after the run: playwright's sync API keeps an event loop running in this thread, and the
    # engine (anyio.run) refuses to start inside one
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser, tmp_path):
    pg = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    pg.screenshot(path=str(tmp_path / "last.png"), full_page=True)
    pg.close()
    assert errors == [], errors  # no script error on the page, whatever the test did


def js_num(x) -> str:
    """A number as the page's num() writes it (3 decimals; integers with commas; exponents
    for the very small and very large)."""
    if x is None or x != x:
        return ""
    if float(x).is_integer():
        return f"{int(x):,}"
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e6):
        return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{x:.2e}")
    return f"{x:.3f}"


def digits(text: str) -> int:
    assert re.fullmatch(r"\d{1,3}(,\d{3})*", text.strip()), text
    return int(text.replace(",", ""))


def wait_ready(page, part: str = "") -> None:
    """Until the page has shown the answer to its current route, whose hash holds `part`."""
    page.wait_for_function(
        "part => document.body.dataset.ready === location.hash && location.hash.includes(part)",
        arg=part,
    )


def wait_total(page, part: str) -> int:
    wait_ready(page, part)
    return digits(page.text_content("#answers-total"))


def test_overview_shows_the_run_its_counts_and_effects(page, viewer, run, tmp_path):
    from orchestrator.engine.status import tally
    from orchestrator.nightly.effects import run_effects

    page.goto(viewer + "#/overview")
    page.wait_for_selector("#effects tbody tr")
    header = page.text_content("#run-header")
    assert "viewed / r1" in header and "20261130" in header
    counts, _, _ = tally(run[1] / "results.ndjson")
    by_status: dict[str, int] = {}
    for (_, status), n in counts.items():
        by_status[status] = by_status.get(status, 0) + n
    shown = {
        a.get_attribute("data-status"): digits(a.query_selector(".n").text_content())
        for a in page.query_selector_all("#status-counts .status-count")
    }
    assert shown == by_status and set(shown) >= {"ok", "parse_error", "refused"}
    per_model = {}
    for (key, status), n in counts.items():
        per_model[key] = per_model.get(key, 0) + n
    for key, done in per_model.items():
        row = page.query_selector(f'#models tbody tr[data-model-key="{key}"]')
        assert row.query_selector(".done").text_content() == f"{done} / {done}"  # all done
    effects = run_effects(run[1]).effects
    assert page.locator("#effects tbody tr").count() == effects.height > 0
    assert page.locator("#effects button.show-answers").count() == effects.height
    # each row's numbers as analyze computes them (in the page's format: app.js num())
    shown = sorted(
        tuple(td.text_content() for td in tr.query_selector_all("td")[:9])
        for tr in page.query_selector_all("#effects tbody tr")
    )
    expected = sorted(
        (
            e["study"],
            e["measure"],
            e["experiment"] or "",
            e["strategy"] or "",
            e["model"],
            js_num(e["effect"]),
            f"[{js_num(e['ci_low'])}, {js_num(e['ci_high'])}]" if e["ci_low"] is not None else "",
            js_num(e["p"]),
            f"{e['n']:,}" if e["n"] is not None else "",
        )
        for e in effects.to_dicts()
    )
    assert shown == expected
    page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)


def test_filters_count_what_the_results_file_holds(page, viewer, records, run, tmp_path):
    page.goto(viewer + "#/answers")
    page.wait_for_selector("#answers-table tbody tr")
    assert digits(page.text_content("#answers-total")) == records.height
    key_b = records.filter(pl.col("model").struct.field("name") == "sim-b")["modelKey"][0]

    page.select_option('#filters select[name="model"]', key_b)
    want = records.filter(pl.col("modelKey") == key_b)
    assert wait_total(page, f"model={key_b}") == want.height
    page.select_option('#filters select[name="status"]', "parse_error")
    want = want.filter(pl.col("status") == "parse_error")
    assert wait_total(page, "status=parse_error") == want.height > 0
    assert {
        tr.get_attribute("data-task-id")
        for tr in page.query_selector_all("#answers-table tbody tr")
    } == set(want["taskId"])

    page.click("#filters-clear")
    page.select_option('#filters select[name="experiment"]', DECOY)
    want = records.filter(pl.col("experimentSlug") == DECOY)
    assert wait_total(page, f"experiment={DECOY}") == want.height
    page.select_option('#filters select[name="condition"]', "1")
    want = want.filter(pl.col("conditionIndex") == 1)
    assert wait_total(page, "condition=1") == want.height > 0

    # free text: an answer's raw text found nowhere in a prompt (checked against the plan)
    needle = (
        records.filter(
            pl.col("experimentSlug") == "anchoring-first-number", pl.col("status") == "ok"
        )["raw"][0]
        .split(":")[1]
        .rstrip("}")
    )
    assert not any(needle in m["content"] for c in _cells(run[0]) for m in c.messages)
    page.click("#filters-clear")
    page.fill('#filters input[name="q"]', needle)
    want = records.filter(pl.col("raw").str.contains(needle, literal=True))
    assert wait_total(page, "q=") == want.height >= 1
    # free text in the prompts: a word of the decoy prompts, in no other experiment's
    word = _word_of_one_experiment(run[0], DECOY)
    page.fill('#filters input[name="q"]', word.upper())  # case-insensitive
    want = records.filter(
        (pl.col("experimentSlug") == DECOY)
        | pl.col("raw").str.to_lowercase().str.contains(word.lower(), literal=True)
    )
    assert wait_total(page, f"q={word.upper()}") == want.height
    page.screenshot(path=str(tmp_path / "answers.png"), full_page=True)


def test_paging_walks_every_row_once(page, viewer, records):
    page.goto(viewer + "#/answers")
    page.wait_for_selector("#answers-table tbody tr")
    seen: list[str] = []
    pages = -(-records.height // 50)
    for n in range(1, pages + 1):
        wait_ready(page, f"page={n}" if n > 1 else "")
        assert page.text_content("#page-info") == f"page {n} of {pages}"
        ids = [
            tr.get_attribute("data-task-id")
            for tr in page.query_selector_all("#answers-table tbody tr")
        ]
        assert len(ids) == min(50, records.height - 50 * (n - 1))
        seen += ids
        if n < pages:
            page.click("#next-page")
    assert page.is_disabled("#next-page")
    assert sorted(seen) == sorted(records["taskId"])  # each once
    page.click("#prev-page")
    wait_ready(page, f"page={pages - 1}")
    assert page.text_content("#page-info") == f"page {pages - 1} of {pages}"


def test_an_opened_result_shows_its_messages_and_raw_answer(page, viewer, records, run, tmp_path):
    record = records.filter(pl.col("status") == "parse_error").row(0, named=True)
    page.goto(viewer + f"#/answers?status=parse_error&experiment={record['experimentSlug']}")
    page.wait_for_selector(f'#answers-table tbody tr[data-task-id="{record["taskId"]}"]')
    page.click(f'#answers-table tbody tr[data-task-id="{record["taskId"]}"]')
    page.wait_for_selector("#detail-messages .message")
    assert page.is_visible("#detail") and not page.is_visible("#answers")
    assert page.text_content("#detail .raw-answer") == record["raw"]
    cell = next(
        c
        for c in _cells(run[0])
        if c.experiment.slug == record["experimentSlug"]
        and c.condition.index == record["conditionIndex"]
        and c.model_key == record["modelKey"]
        and c.variant.id == record["variant"]
        and c.strategy.id == record["strategy"]
    )
    shown = [
        m.text_content() for m in page.query_selector_all("#detail-messages .message .content")
    ]
    assert shown == [m["content"] for m in cell.messages]
    assert page.text_content("#detail .fact-status") == "parse_error"
    assert page.text_content("#detail .fact-attempts") == str(record["attempts"])
    page.screenshot(path=str(tmp_path / "result.png"), full_page=True)
    page.click("#detail-close")
    page.wait_for_selector("#answers-table tbody tr")
    assert "status=parse_error" in page.evaluate("location.hash")


def test_an_effect_opens_its_conditions_side_by_side(page, viewer, records, run, tmp_path):
    from orchestrator.nightly.effects import run_effects

    effects = run_effects(run[1]).effects
    row_index = next(
        i for i, e in enumerate(effects.iter_rows(named=True)) if e["experiment"] == DECOY
    )
    effect = effects.row(row_index, named=True)
    page.goto(viewer + "#/overview")
    page.wait_for_selector("#effects tbody tr")
    page.locator("#effects tbody tr").nth(row_index).locator("button.show-answers").click()
    page.wait_for_selector("#effect-view .condition-column")
    mine = records.filter(
        pl.col("experimentSlug") == DECOY,
        pl.col("modelKey") == effect["modelKey"],
        pl.col("strategy") == effect["strategy"],
    )
    columns = page.query_selector_all("#effect-view .condition-column")
    assert [int(c.get_attribute("data-index")) for c in columns] == sorted(
        mine["conditionIndex"].unique()
    )
    for column in columns:
        part = mine.filter(pl.col("conditionIndex") == int(column.get_attribute("data-index")))
        assert digits(column.query_selector(".condition-total").text_content()) == part.height
        want = {(a or ""): n for a, n in part.group_by("choice").len().iter_rows()}
        bars = {
            d.get_attribute("data-answer"): int(d.get_attribute("data-count"))
            for d in column.query_selector_all(".distribution .dist-row")
        }
        assert bars == want
        ids = [tr.get_attribute("data-task-id") for tr in column.query_selector_all("tbody tr")]
        assert len(ids) == min(20, part.height) and set(ids) <= set(part["taskId"])
    page.screenshot(path=str(tmp_path / "effect.png"), full_page=True)
    first = columns[0].query_selector("tbody tr")
    task = first.get_attribute("data-task-id")
    first.click()
    page.wait_for_selector("#detail-messages .message")
    assert task in page.text_content("#detail-body")


def test_an_api_error_shows_in_the_banner(page, viewer):
    page.goto(viewer + "#/answer/no-such-task")
    page.wait_for_selector("#error-banner:not([hidden])")
    assert "no-such-task" in page.text_content("#error-banner")
    page.goto(viewer + "#/answers?condition=abc")
    wait_ready(page, "condition=abc")
    assert page.is_visible("#error-banner") and "condition" in page.text_content("#error-banner")
    assert "Traceback" not in page.text_content("body")


def _cells(config: Path):
    from orchestrator.plan import Plan
    from orchestrator.session import load_campaign

    return Plan(load_campaign(config)).cells


def _word_of_one_experiment(config: Path, slug: str) -> str:
    """A word in every prompt of experiment `slug` and in no prompt of another."""
    texts: dict[str, list[str]] = {}
    for c in _cells(config):
        texts.setdefault(c.experiment.slug, []).append(
            "\n".join(m["content"] for m in c.messages).lower()
        )
    for word in sorted(set(re.findall(r"[a-z]{6,}", texts[slug][0])), key=len, reverse=True):
        if all(word in t for t in texts[slug]) and not any(
            word in t for s, ts in texts.items() if s != slug for t in ts
        ):
            return word
    raise AssertionError(f"no word only in {slug}'s prompts")


HOSTILE = '<img id="injected" src="x" onerror="window.pwned = 1">'


def test_a_run_still_going_refreshes_and_answers_stay_text(browser, run, tmp_path):
    """A copy of the run with half its results and a torn last line (a run being written): the
    overview says so and shows the tasks pending, then follows the file as it grows. A model's
    answer holding markup is shown as text, never made into an element."""
    import shutil

    import orjson

    copy = tmp_path / "going"
    shutil.copytree(run[1], copy)
    lines = (run[1] / "results.ndjson").read_bytes().splitlines(keepends=True)
    first = orjson.loads(lines[0])
    first["response"]["raw"] = HOSTILE
    lines[0] = orjson.dumps(first) + b"\n"
    half = len(lines) // 2
    (copy / "results.ndjson").write_bytes(b"".join(lines[:half]) + lines[half][:20])  # torn
    served = Served(copy)
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(served.url + "#/overview")
        page.wait_for_selector("#models tbody tr")
        assert page.is_visible("#overview-note")
        done = sum(
            int(d.text_content().split(" / ")[0]) for d in page.query_selector_all("#models .done")
        )
        assert done == half and page.locator("#models .pending").count() >= 1
        (copy / "results.ndjson").write_bytes(b"".join(lines))  # the run goes on, and ends
        page.wait_for_function(
            "n => [...document.querySelectorAll('#models .done')].reduce("
            "(s, d) => s + parseInt(d.textContent.split(' / ')[0]), 0) === n",
            arg=len(lines),
            timeout=60_000,
        )  # the 3 s refresh, not a reload
        assert page.locator("#models .pending").count() == 0 and not page.is_visible(
            "#overview-note"
        )

        page.goto(served.url + "#/answers?q=injected")
        wait_ready(page, "q=injected")
        assert page.text_content("#answers-table tbody tr .raw") == HOSTILE
        page.goto(served.url + f"#/answer/{first['taskId']}")
        wait_ready(page, first["taskId"])
        assert page.text_content("#detail .raw-answer") == HOSTILE
        assert page.query_selector("#injected") is None and page.evaluate("window.pwned") is None
    finally:
        page.close()
        served.stop()


def test_the_screenshots_script_writes_its_three_pictures(browser, viewer, tmp_path):
    from tests.viewer_browser import screenshots

    paths = screenshots(browser, viewer, tmp_path / "docs")
    assert [p.name for p in paths] == [
        "viewer-overview.png",
        "viewer-answers.png",
        "viewer-result.png",
    ]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_a_campaign_folder_shows_its_history_and_the_last_two_runs_compared(browser, tmp_path):
    """`view CAMPAIGN_DIR`: the History page lists every run and the comparison of the last two
    as `orchestrator compare` makes it (a run folder has no History link)."""
    from orchestrator.nightly.compare import as_json
    from orchestrator.nightly.comparing import load_and_compare

    runs = []
    # in processes of their own: playwright's sync API runs an event loop in this thread, and
    # `run` starts its own (anyio.run), which cannot start inside a running one
    for run_id in ("n1", "n2"):
        config = write_config(
            tmp_path,
            CONFIG.format(out=tmp_path / "runs").replace('"r1"', f'"{run_id}"'),
            f"{run_id}.toml",
        )
        assert cli_process("run", str(config), cwd=tmp_path).returncode == 0
        runs.append(tmp_path / "runs" / "viewed" / run_id)
    served = Served(tmp_path / "runs" / "viewed")
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(served.url + "#/history")
        wait_ready(page, "history")
        page.wait_for_selector("#nav-history:not([hidden])")
        rows = page.query_selector_all("#history-runs tbody tr")
        assert [r.query_selector("td").text_content() for r in rows] == ["n1", "n2"]
        c = load_and_compare(runs[0], runs[1])
        expected = as_json(c, set(), 0)
        flagged = {k: n for k, n in expected["counts"].items() if n}
        text = page.text_content("#history-flags")
        assert (
            all(f"{k} {n}" in text for k, n in flagged.items()) if flagged else "no flags" in text
        )
        assert len(
            page.query_selector_all("#history-compare table")[-1].query_selector_all("tbody tr")
        ) == len(expected["effects"])
        page.screenshot(path=str(tmp_path / "history.png"), full_page=True)
    finally:
        page.close()
        served.stop()

"""A reasoning model's own trace in the viewer: folded under the answer, shown whole when
opened, never mixed into the raw answer. In chromium, as the other viewer page tests."""

from __future__ import annotations

import polars as pl
import pytest

from tests.conftest import run_quietly, write_config
from tests.viewer_browser import VIEWPORT, Served, launch, missing

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    if why := missing():
        pytest.skip(f"browser tests skipped: {why}")
    root = tmp_path_factory.mktemp("reasoned")
    config = write_config(
        root,
        f"""
        name = "reasoned"
        jobs = ["paired"]
        samples = 2
        output_dir = "{root / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim-reasoner"
        temperature = 1.0
        reasoning = true
        """,
    )
    run_quietly(config)
    run_dir = root / "runs" / "reasoned" / "default"
    server = Served(run_dir)
    yield server.url, pl.read_ndjson(run_dir / "results.ndjson")
    server.stop()


def test_the_trace_is_folded_under_the_answer_and_opens_whole(served):
    from playwright.sync_api import sync_playwright

    url, records = served
    record = records.row(0, named=True)
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(url + f"#/answer/{record['taskId']}")
        page.wait_for_selector("#detail-reasoning")
        trace = record["response"]["reasoning"]
        assert page.text_content("#detail .raw-answer") == record["response"]["raw"]
        assert trace not in page.text_content("#detail .raw-answer")
        assert not page.is_visible("#detail-reasoning .reasoning-text")  # folded
        page.click("#detail-reasoning summary")
        assert page.is_visible("#detail-reasoning .reasoning-text")
        assert page.text_content("#detail-reasoning .reasoning-text") == trace
        browser.close()

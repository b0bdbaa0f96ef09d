"""inspect_ai's own viewer (`inspect view`) opens the logs `export --format inspect` writes and
lists one sample per task, in Debian's chromium (issue 33, item 4)."""

from __future__ import annotations

import pytest

from tests.conftest import cli_process, write_config
from tests.inspect_view import inspect_view, open_first_log
from tests.viewer_browser import VIEWPORT, launch, missing

pytestmark = pytest.mark.browser


def test_inspect_view_lists_every_task_of_the_exported_log(tmp_path):
    if why := missing():
        pytest.skip(f"browser tests skipped: {why}")
    pytest.importorskip("inspect_ai")
    cfg = write_config(
        tmp_path,
        f"""
        name = "iv"
        jobs = ["paired"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    assert cli_process("run", str(cfg), cwd=tmp_path).returncode == 0
    run_dir = tmp_path / "runs" / "iv" / "default"
    out = tmp_path / "logs"
    done = cli_process(
        "export", str(run_dir), "--format", "inspect", "--out", str(out), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, inspect_view(out) as url:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            open_first_log(page, url)
            page.wait_for_selector("text=24 Samples", timeout=60_000)  # 6 x 2 x 2 tasks
            assert "paired" in page.content()
        finally:
            browser.close()

"""`inspect view` (inspect_ai's own log viewer) serving logs `export --format inspect` wrote,
driven in Debian's chromium: for the docs' screenshot (`python -m tests.inspect_view LOG_DIR
OUT.png`) and the browser test that its samples show."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def inspect_view(log_dir: Path):
    """The URL of `inspect view` serving log_dir, on a free loopback port, while in use."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inspect = Path(sys.executable).with_name("inspect")
    proc = subprocess.Popen(
        [
            str(inspect),
            "view",
            "--log-dir",
            str(log_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("inspect view did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait()


def open_first_log(page, url: str) -> None:
    """The log list, then the first log's samples."""
    page.goto(url)
    page.wait_for_load_state("networkidle")
    links = page.locator("a[href*='.eval']")
    if links.count():
        links.first.click()
        page.wait_for_load_state("networkidle")


def screenshot(log_dir: Path, out: Path) -> Path:
    from playwright.sync_api import sync_playwright

    from tests.viewer_browser import launch

    with sync_playwright() as pw, inspect_view(log_dir) as url:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1400, "height": 860})
        open_first_log(page, url)
        time.sleep(2)  # its samples list renders after the log is read
        page.screenshot(path=str(out))
        browser.close()
    return out


if __name__ == "__main__":
    print(screenshot(Path(sys.argv[1]), Path(sys.argv[2])))

"""A real browser on the viewer: Debian's chromium driven by playwright (the system browser; no
browser download), and the real server (orchestrator.viewer.server) run in a thread of its own.
Used by tests/test_viewer_browser.py, and to write the screenshots in docs/viewer.md of a run:

    python -m tests.viewer_browser runs/demo/default docs
"""

from __future__ import annotations

import asyncio
import queue
import shutil
import sys
import threading
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 860}


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; it is in the dev extras)"
    if not (Path(CHROMIUM).is_file() or shutil.which("chromium")):
        return f"no chromium at {CHROMIUM} (apt-get install -y chromium)"
    return None


def launch(playwright):
    return playwright.chromium.launch(
        executable_path=CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium"),
        args=ARGS,
    )


class Served:
    """`orchestrator view FOLDER --port 0`, in a thread with its own event loop."""

    def __init__(self, folder: Path) -> None:
        from orchestrator.viewer.server import open_target, serve

        data, campaign_dir = open_target(folder)
        self.loop = asyncio.new_event_loop()
        ready: queue.Queue = queue.Queue()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.task = self.loop.create_task(serve(data, 0, campaign_dir, ready.put))
            try:
                self.loop.run_until_complete(self.task)
            except BaseException as exc:  # cancelled when stopped; anything else is reported
                ready.put(exc)
            finally:
                self.loop.close()

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        got = ready.get(timeout=120)
        if isinstance(got, BaseException):
            raise got
        self.url: str = got

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(timeout=30)


def screenshots(browser, url: str, out_dir: Path) -> list[Path]:
    """The overview, the answers browser and an opened result of the run served at url, as
    PNGs in out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"viewer-{n}.png" for n in ("overview", "answers", "result")]
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(url + "#/overview")
        page.wait_for_selector("#models tbody tr")
        page.screenshot(path=str(paths[0]), full_page=True)
        page.goto(url + "#/answers")
        page.wait_for_selector("#answers-table tbody tr")
        page.screenshot(path=str(paths[1]))
        page.click("#answers-table tbody tr")
        page.wait_for_selector("#detail-messages")
        page.screenshot(path=str(paths[2]), full_page=True)
    finally:
        page.close()
    return paths


def main(run_dir: Path, out_dir: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    served = Served(run_dir)  # before playwright: its sync API holds an event loop in this thread
    try:
        with sync_playwright() as p:
            browser = launch(p)
            try:
                return screenshots(browser, served.url, out_dir)
            finally:
                browser.close()
    finally:
        served.stop()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.viewer_browser RUN_DIR OUT_DIR")
    if why := missing():
        sys.exit(why)
    for path in main(Path(sys.argv[1]), Path(sys.argv[2])):
        print(path)

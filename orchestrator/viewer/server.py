"""The viewer's aiohttp app on 127.0.0.1: the page (static/) and its JSON API (docs/viewer.md).
Every answer is JSON; an error is {"error", "fix"} with a 4xx (the user's input) or a 500
(ours, logged to stderr), never a traceback on the page. The reading runs in a worker
thread, so one slow load does not stop the server from answering."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from orchestrator.errors import UserError
from orchestrator.viewer.data import NotFound, RunData
from orchestrator.viewer.overview import History, effect, overview

STATIC = Path(__file__).parent / "static"
_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS),
        status=status,
        content_type="application/json",
    )


def _error(status: int, message: str, fix: str | None) -> web.Response:
    return _json({"error": message, "fix": fix}, status)


@web.middleware
async def local_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Only a page addressed to this machine: a web page elsewhere whose host name a DNS trick
    points at 127.0.0.1 (DNS rebinding) names its own host, and is refused. And only the
    viewer's own page: a request a browser says another site made (Sec-Fetch-Site cross-site,
    or same-site: another port of this machine) is refused, so a page elsewhere cannot load
    the run's answers or embed them. Its own page (same-origin), an address typed in (none)
    and clients that send no such header (curl, older browsers) are answered."""
    host = request.headers.get("Host", "")
    if not _LOCAL_HOST.fullmatch(host):  # exactly a loopback name and a port, nothing after
        return _error(
            403,
            f"the viewer answers pages of 127.0.0.1 only, not of {host[:80]!r}",
            "open the address orchestrator view printed",
        )
    if request.headers.get("Sec-Fetch-Site", "").strip().lower() in _OTHER_SITES:
        return _error(
            403,
            "the viewer answers its own page only, not a request made by another site",
            "open the address orchestrator view printed in the browser's address bar",
        )
    return await handler(request)


_LOCAL_HOST = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\])(?::\d{1,5})?")
_OTHER_SITES = ("cross-site", "same-site")  # Sec-Fetch-Site values of a request not its own
# The page loads only its own files and asks only its own API: no inline script, no other
# origin, no framing, and no sniffing a JSON answer (which quotes model text) into a page.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


async def _secure(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except NotFound as exc:
        return _error(404, exc.detail, exc.fix)
    except UserError as exc:
        return _error(400, exc.detail, exc.fix)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason, "see the page's links for what there is")
    except Exception as exc:  # ours: a short message on the page, the traceback on stderr
        traceback.print_exc(file=sys.stderr)
        return _error(
            500,
            f"the viewer failed: {type(exc).__name__}: {exc}"[:300],
            "see the terminal running orchestrator view",
        )


def make_app(data: RunData, campaign_dir: Path | None = None) -> web.Application:
    history = History(campaign_dir) if campaign_dir is not None else None

    async def off(fn, *args):  # polars and file reads, off the event loop
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def params(request: web.Request) -> dict[str, str]:
        return dict(request.query)

    async def index(request: web.Request) -> web.StreamResponse:
        return _static("index.html")

    async def static(request: web.Request) -> web.StreamResponse:
        return _static(request.match_info["name"])

    async def api_overview(request: web.Request) -> web.Response:
        return _json(await off(overview, data))

    async def api_facets(request: web.Request) -> web.Response:
        return _json(await off(data.facets))

    async def api_answers(request: web.Request) -> web.Response:
        return _json(await off(data.answers, params(request)))

    async def api_answer(request: web.Request) -> web.Response:
        part = request.query.get("part", "1")
        return _json(await off(data.record, request.match_info["task_id"], part))

    async def api_effect(request: web.Request) -> web.Response:
        return _json(await off(effect, data, params(request)))

    async def api_history(request: web.Request) -> web.Response:
        if history is None:
            raise NotFound(
                "not a campaign folder",
                fix="orchestrator view runs/<campaign>/ shows the history of its runs",
            )
        return _json(await off(history.get))

    app = web.Application(middlewares=[local_only, errors])
    app.on_response_prepare.append(_secure)
    app.add_routes(
        [
            web.get("/", index),
            web.get("/static/{name}", static),
            web.get("/api/overview", api_overview),
            web.get("/api/facets", api_facets),
            web.get("/api/answers", api_answers),
            web.get("/api/answer/{task_id}", api_answer),
            web.get("/api/effect", api_effect),
            web.get("/api/history", api_history),
        ]
    )
    return app


def _static(name: str) -> web.StreamResponse:
    path = STATIC / name
    if "/" in name or name.startswith(".") or not path.is_file():
        raise NotFound(
            f"no file {name} in the viewer's static files",
            fix="reinstall the package: its static files are missing"
            if name == "index.html"
            else None,
        )
    return web.Response(
        body=path.read_bytes(), content_type=_TYPES.get(path.suffix, "application/octet-stream")
    )


def _warm(data: RunData) -> None:
    from orchestrator.viewer.overview import effects

    try:
        effects(data)
    except Exception:  # said again, as JSON, when the overview asks for them
        pass


class Viewer:
    """The app served on 127.0.0.1:port (0: any free port), in the current event loop."""

    def __init__(self, data: RunData, campaign_dir: Path | None = None) -> None:
        self.app = make_app(data, campaign_dir)
        self.runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def start(self, port: int) -> None:
        self.runner = web.AppRunner(self.app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", port)
        try:
            await site.start()
        except OSError as exc:  # in use, or not ours to take
            await self.runner.cleanup()
            raise UserError(
                f"cannot listen on 127.0.0.1:{port}: "
                f"{os.strerror(exc.errno) if exc.errno else exc}",
                field="--port",
                fix="pick another port, or --port 0 for any free one",
            ) from None
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


def open_target(folder: Path) -> tuple[RunData, Path | None]:
    """A run folder, or a campaign folder (its latest run, and its history): refused before
    anything is served when it is neither."""
    from orchestrator.engine.store import MANIFEST
    from orchestrator.nightly.runs import campaign_runs, latest_run

    if not folder.is_dir():
        raise UserError(
            "no such folder", file=str(folder), fix="give a run folder: runs/<campaign>/<run id>/"
        )
    if (folder / MANIFEST).is_file():
        return RunData.open(folder), None
    if campaign_runs(folder):
        return RunData.open(latest_run(folder)), folder
    raise UserError(
        "not a run folder (no manifest.json) nor a campaign folder of runs",
        file=str(folder),
        fix="give a run folder (runs/<campaign>/<run id>/) or its campaign folder (runs/<campaign>/)",
    )


async def serve(
    data: RunData,
    port: int,
    campaign_dir: Path | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until cancelled. The results are read once before the address is printed, so the
    first page is quick; the effects (an analysis: seconds on a large run) are computed next,
    in the background, so the overview is ready sooner than when first asked."""
    viewer = Viewer(data, campaign_dir)
    await viewer.start(port)
    try:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, data.loaded)
        if on_ready is not None:
            on_ready(viewer.url)
        warm = loop.run_in_executor(None, _warm, data)
        await asyncio.Event().wait()
        await warm
    finally:
        await viewer.stop()

"""What a server that answers badly can do to a run (issue 31, items 3 and 4): a redirect to
another origin gets no key, and a gzip bomb does not blow up memory. Real loopback servers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import zlib

import orjson
from aiohttp import web

from tests.conftest import ROOT, cli, write_config


class Loopback:
    """An aiohttp app on 127.0.0.1 in a thread of its own; every request's headers are kept."""

    def __init__(self, handler) -> None:
        self.seen: list[dict[str, str]] = []

        async def record(request: web.Request) -> web.StreamResponse:
            self.seen.append(dict(request.headers))
            return await handler(request)

        self.loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", record)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def _config(tmp_path, provider: str, url: str, in_flight: int = 2):
    return write_config(
        tmp_path,
        f"""
        name = "u"
        jobs = ["paired"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "{provider}"
        name = "m"
        base_url = "{url}"
        api_key_env = "SECRET_KEY_FOR_TEST"
        [limits.{provider}]
        max_in_flight = {in_flight}
        max_attempts = 2
        """,
    )


def test_a_redirect_to_another_origin_carries_no_key(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_KEY_FOR_TEST", "sk-ant-very-secret-key-0001")

    async def elsewhere(request: web.Request) -> web.Response:
        return web.json_response({"content": [{"type": "text", "text": "{}"}]})

    other = Loopback(elsewhere)

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(other.url + "/v1/messages")

    first = Loopback(redirect)
    try:
        for provider in ("anthropic", "gemini", "openai"):
            (tmp_path / provider).mkdir()
            done = cli("run", str(_config(tmp_path / provider, provider, first.url)), cwd=tmp_path)
            said = " ".join((done.stdout + done.stderr).split())
            assert done.returncode == 1, said
            assert "redirect" in said and other.url.split("//")[1] in said
            assert "sk-ant-very-secret-key-0001" not in said
    finally:
        first.stop()
        other.stop()
    assert first.seen and not other.seen  # the second origin got nothing, no key at all


def _bomb(size: int = 400 << 20) -> bytes:
    """A gzip body of a few hundred KB that expands to `size` bytes."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block, out = b"0" * (1 << 20), []
    for _ in range(size >> 20):
        out.append(packer.compress(block))
    out.append(packer.flush())
    return b"".join(out)


def test_a_gzip_bomb_is_refused_and_memory_stays_bounded(tmp_path):
    """4 calls in flight, each answered by a body that expands to 400 MB (5.3 GB peak before
    the bound): the whole process's peak, from the kernel, stays under 400 MB, and the model
    stops with a message that says why."""
    bomb = _bomb()
    assert len(bomb) < 1 << 20

    async def explode(request: web.Request) -> web.Response:
        return web.Response(
            body=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    server = Loopback(explode)
    config = _config(tmp_path, "openai", server.url + "/v1", in_flight=4)
    env = {**os.environ, "SECRET_KEY_FOR_TEST": "k" * 20, "PYTHONPATH": str(ROOT)}
    log, measured = tmp_path / "out.txt", tmp_path / "peak.txt"
    # Linux carries a process's peak RSS across exec, and a child forked from this (large)
    # test process would report ours: a small launcher starts the run and reads its peak.
    launcher = (
        "import os, sys; pid = os.posix_spawn(sys.executable, sys.argv[2:], os.environ); "
        "_, status, usage = os.wait4(pid, 0); "
        "open(sys.argv[1], 'w').write(f'{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}')"
    )
    try:
        with open(log, "w") as out:
            subprocess.run(
                [sys.executable, "-c", launcher, str(measured), sys.executable, "-m",
                 "orchestrator", "run", str(config)],
                env=env, stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False,
            )  # fmt: skip
    finally:
        server.stop()
    said = " ".join(log.read_text().split())
    code, peak_kb = map(int, measured.read_text().split())
    assert code == 1, said
    assert "over 32 MB (decompressed)" in said
    results = (tmp_path / "runs/u/default/results.ndjson").read_bytes().splitlines()
    assert results and all(orjson.loads(x)["status"] == "failed" for x in results)
    peak_mb = peak_kb / 1024  # kilobytes on Linux
    print(f"peak RSS {peak_mb:.0f} MB")
    assert peak_mb < 400, f"peak RSS {peak_mb:.0f} MB"


def test_a_batch_results_url_on_another_origin_is_not_fetched(monkeypatch):
    import anyio
    import pytest

    from orchestrator.providers.anthropic import AnthropicProvider
    from orchestrator.providers.errors import Fatal
    from orchestrator.spec.campaign import ModelConfig

    monkeypatch.setenv("SECRET_KEY_FOR_TEST", "sk-ant-very-secret-key-0002")
    seen: list = []

    async def results(request: web.Request) -> web.Response:
        return web.Response(text="{}\n")

    other = Loopback(results)
    model = ModelConfig(
        provider="anthropic",
        name="m",
        base_url="http://127.0.0.1:9",
        api_key_env="SECRET_KEY_FOR_TEST",
    )
    provider = AnthropicProvider(model)

    async def fetch(url: str) -> None:
        try:
            async with provider.stream("GET", url):
                seen.append("opened")
        finally:
            await provider.aclose()

    try:
        # absolute, and without a scheme ("//host/path": a client resolves it to that host)
        for url in (other.url + "/results", other.url.removeprefix("http:") + "/results"):
            with pytest.raises(Fatal, match="another origin"):
                anyio.run(fetch, url)
    finally:
        other.stop()
    assert not seen and not other.seen


def _answered_by(tmp_path, handler, provider: str = "openai"):
    server = Loopback(handler)
    config = _config(tmp_path, provider, server.url + ("/v1" if provider == "openai" else ""))
    try:
        done = cli("run", str(config), cwd=tmp_path)
    finally:
        server.stop()
    return done, " ".join((done.stdout + done.stderr).split())


ANSWER = orjson.dumps(
    {
        "model": "m",
        "choices": [{"message": {"content": '{"value": 3}'}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
)


def test_deflate_raw_or_wrapped_is_read_and_an_unasked_encoding_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_KEY_FOR_TEST", "k" * 20)
    for name, body in (("zlib", zlib.compress(ANSWER)), ("raw", zlib.compress(ANSWER, wbits=-15))):

        async def deflated(request: web.Request, body=body) -> web.Response:
            return web.Response(body=body, headers={"Content-Encoding": "deflate"})

        (tmp_path / name).mkdir()
        done, said = _answered_by(tmp_path / name, deflated)
        assert done.returncode == 0, said

    async def brotli(request: web.Request) -> web.Response:
        return web.Response(body=b"\x1b\x00\x00", headers={"Content-Encoding": "br"})

    (tmp_path / "br").mkdir()
    done, said = _answered_by(tmp_path / "br", brotli)
    assert done.returncode == 1 and "Content-Encoding 'br'" in said


def test_an_error_body_is_read_to_64_kb_only(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_KEY_FOR_TEST", "k" * 20)
    huge = b'{"error": {"message": "' + b"e" * (8 << 20) + b'"}}'

    async def refuse(request: web.Request) -> web.Response:
        return web.Response(
            status=400, body=zlib.compress(huge), headers={"Content-Encoding": "deflate"}
        )

    from orchestrator.providers.http import HTTPProvider

    seen: list[int] = []
    real = HTTPProvider.error

    def error(self, status, headers, payload):
        seen.append(len(payload))
        return real(self, status, headers, payload)

    monkeypatch.setattr(HTTPProvider, "error", error)
    done, said = _answered_by(tmp_path, refuse)
    assert done.returncode == 1 and seen and max(seen) <= 1 << 16

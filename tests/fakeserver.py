"""A real aiohttp server on loopback speaking OpenAI chat completions, with injectable faults.

Used by the tests (in a background thread) and by the benchmarks (as a subprocess:
`python -m tests.fakeserver --port N`).
"""
from __future__ import annotations

import argparse
import asyncio
import random
import re
import threading
import time
from dataclasses import dataclass, field

import orjson
from aiohttp import web

_CHOICES = re.compile(r'\{"choice":\s*"([^"]+)"\}')
_OPTIONS = re.compile(r"Choose one option:\s*([^;.]+?)[;.]")


def answer_for(prompt: str) -> str:
    """A well-formed answer for a seed-000 style prompt."""
    if '"choice"' in prompt:
        found = [c for c in _CHOICES.findall(prompt) if c != "..."] or _OPTIONS.findall(prompt)
        return orjson.dumps({"choice": found[0].strip()}).decode()
    return '{"value": 4}'


@dataclass
class Faults:
    """Probabilities per request; the rest are answered normally."""

    rate_limited: float = 0.0  # 429 with Retry-After
    server_error: float = 0.0  # 500
    dropped: float = 0.0  # connection closed without an answer
    slow: float = 0.0  # answer after `slow_s` (beyond the client's timeout)
    malformed: float = 0.0  # 200 with text that holds no JSON answer
    retry_after: str = "0.05"
    slow_s: float = 2.0


@dataclass
class Log:
    arrivals: list[float] = field(default_factory=list)
    served: dict[str, int] = field(default_factory=dict)
    malformed_texts: set[str] = field(default_factory=set)
    bodies: list[dict] = field(default_factory=list)


class FakeLLMServer:
    def __init__(self, faults: Faults | None = None, latency_s: float = 0.0, seed: int = 1) -> None:
        self.faults, self.latency_s = faults or Faults(), latency_s
        self.rng = random.Random(seed)
        self.log = Log()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _count(self, kind: str) -> None:
        self.log.served[kind] = self.log.served.get(kind, 0) + 1

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.log.arrivals.append(time.monotonic())
        body = orjson.loads(await request.read())
        self.log.bodies.append(body)
        f, roll = self.faults, self.rng.random()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        for kind, p in (("rate_limited", f.rate_limited), ("server_error", f.server_error),
                        ("dropped", f.dropped), ("slow", f.slow), ("malformed", f.malformed)):
            if roll < p:
                break
            roll -= p
        else:
            kind = "ok"
        self._count(kind)
        if kind == "rate_limited":
            return web.json_response({"error": {"message": "slow down"}}, status=429,
                                     headers={"Retry-After": f.retry_after})
        if kind == "server_error":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if kind == "dropped":
            request.transport.close()
            return web.Response()
        if kind == "slow":
            await asyncio.sleep(f.slow_s)
        text = answer_for(body["messages"][-1]["content"])
        if kind == "malformed":
            text = f"Let me think. The answer is roughly {self.rng.randint(1, 999)}."
            self.log.malformed_texts.add(text)
        return web.Response(body=orjson.dumps({
            "id": "x", "object": "chat.completion", "model": body["model"] + "-served",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58}}),
            content_type="application/json")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        return app

    async def start_async(self, port: int = 0) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def start_in_thread(self) -> FakeLLMServer:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start_async())
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=serve, daemon=True).start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)


def main() -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server on loopback")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    server = FakeLLMServer(latency_s=args.latency)

    async def run() -> None:
        await server.start_async(args.port)
        print(server.port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()

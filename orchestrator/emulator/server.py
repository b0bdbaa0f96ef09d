"""The emulator's HTTP server: OpenAI chat completions, Anthropic Messages and Gemini
generateContent on one loopback port, with real limit headers and injectable faults."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from aiohttp import web

from orchestrator.emulator import reasoning
from orchestrator.emulator.answers import answer, echo_logprobs, tokens
from orchestrator.emulator.batch import BatchBehaviour
from orchestrator.emulator.batch_routes import BatchRoutes
from orchestrator.emulator.limits import Window
from orchestrator.emulator.protocols import PROTOCOLS, Call, Protocol, echoed


@dataclass
class Faults:
    """Per-request probabilities of each fault; the rest are answered normally."""

    rate_limited: float = 0.0  # a 429 whatever the limits say
    server_error: float = 0.0  # 500
    overloaded: float = 0.0  # 503 (OpenAI, Gemini) / 529 (Anthropic)
    dropped: float = 0.0  # the connection closes without an answer
    slow: float = 0.0  # the answer comes after slow_s
    malformed: float = 0.0  # 200, but the text holds no JSON answer
    refusal: float = 0.0  # the model declines (content filter / refusal / SAFETY)
    quota: float = 0.0  # the key's quota is used up (OpenAI insufficient_quota, Gemini's daily
    #                     quota, Anthropic's credit balance), each in the provider's own words
    retry_after_s: float = 0.05  # what an injected 429 or overload asks for
    retry_after: str | None = None  # or this hint, verbatim ("inf", "1e400", "soon"): hostile
    slow_s: float = 2.0


@dataclass
class EmulatorConfig:
    rpm: int | None = None  # per credential and protocol, in any window of period_s
    tpm: int | None = None  # prompt tokens + max_tokens at admission, settled to actual usage
    period_s: float = 60.0
    latency_s: float = 0.0
    faults: Faults = field(default_factory=Faults)
    keys: frozenset[str] | None = None  # accepted API keys; None accepts any
    token_ratio: float = 1.0  # its tokenizer against the ~4-characters-a-token estimate
    seed: int = 1
    context_tokens: int | None = None  # a longer prompt gets the provider's own "too long" 400
    thoughts_tokens: int = 0  # Gemini: tokens each call spends thinking, within maxOutputTokens
    headers: dict[str, str] = field(default_factory=dict)  # sent with every answer, over its own
    echo_key: bool = False  # error bodies quote the request's key, as careless servers do
    # Completions with echo: log-probability added to a token (by its word) in any context, a
    # prior for some answers' words that DC-PMI must remove.
    logprob_bonus: dict[str, float] = field(default_factory=dict)
    # A scripted model: a request whose prompt holds one of these markers gets the marker's
    # replies in turn, the last one repeated (a judge that answers invalid, then valid).
    script: dict[str, list[str]] = field(default_factory=dict)
    # What a provider updating its model behind the name would change: the model string the
    # answers name (requested name -> served string) and OpenAI's system_fingerprint.
    served_as: dict[str, str] = field(default_factory=dict)
    system_fingerprint: str | None = "fp_emulator"
    # The answer text of a call from (protocol name, its request body as sent), or None for the
    # default answer: the online routes and batch items alike (a test serves a respondent here).
    respondent: Callable[[str, dict[str, Any]], str | None] | None = None
    # Reasoning models (reasoning.py): names OpenAI's rules apply to besides o1-o9*/gpt-5*; the
    # hidden reasoning tokens of a medium reasoning_effort; the trace a visible reasoning shows,
    # from (protocol name, request body as sent), or None for the default.
    reasoning_models: frozenset[str] = frozenset()
    reasoning_tokens: int = 128
    reasoner: Callable[[str, dict[str, Any]], str | None] | None = None
    batch: BatchBehaviour = field(default_factory=BatchBehaviour)


LOG_LIMIT = 20_000  # entries each of the Log's lists keeps: the newest, so a long soak's
#                    memory stays bounded (its counters count everything)


class Recent(list):
    """A list that keeps its newest LOG_LIMIT entries (trimmed by a tenth at a time)."""

    def append(self, item: Any) -> None:
        super().append(item)
        if len(self) > LOG_LIMIT:
            del self[: len(self) - LOG_LIMIT + LOG_LIMIT // 10]


@dataclass
class Log:
    arrivals: list[tuple[float, str, str]] = field(
        default_factory=Recent
    )  # (time, protocol, model)
    statuses: Counter = field(default_factory=Counter)  # (protocol, status) -> answers
    replies: list[tuple[float, str, int]] = field(
        default_factory=Recent
    )  # (time, protocol, status)
    served: Counter = field(default_factory=Counter)  # fault kind or "ok" -> answers
    bodies: list[dict[str, Any]] = field(default_factory=Recent)
    malformed_texts: set[str] = field(default_factory=set)
    admitted_tokens: list[tuple[float, str, float]] = field(default_factory=Recent)
    scripted: Counter = field(default_factory=Counter)  # script marker -> requests answered
    # Batch APIs: uploaded files (id, bytes); batches created per protocol; how often each custom
    # id was in a created batch and was processed (answered or errored: never twice, if the
    # client submits nothing twice); answers per (protocol, route, status).
    uploads: list[tuple[str, int]] = field(default_factory=Recent)
    deleted_files: list[str] = field(default_factory=Recent)  # OpenAI files deleted by clients
    batches: Counter = field(default_factory=Counter)
    batch_submitted: Counter = field(default_factory=Counter)
    batch_items: Counter = field(default_factory=Counter)
    batch_calls: Counter = field(default_factory=Counter)


class Emulator:
    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config or EmulatorConfig()
        self.rng = random.Random(self.config.seed)
        self.log = Log()
        self.windows: dict[tuple[str, str], Window] = {}
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.batch = BatchRoutes(self)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base_url(self, protocol: str) -> str:
        return self.url + ("/v1" if protocol == "openai" else "")

    def _window(self, protocol: str, credential: str) -> Window:
        key = (protocol, credential)
        if key not in self.windows:
            c = self.config
            self.windows[key] = Window(c.rpm, c.tpm, c.period_s)
        return self.windows[key]

    def _scripted(self, prompt: str) -> str | None:
        for marker, replies in self.config.script.items():
            if marker in prompt:
                n = self.log.scripted[marker]
                self.log.scripted[marker] += 1
                return replies[min(n, len(replies) - 1)]
        return None

    def _fault(self) -> str:
        roll, f = self.rng.random(), self.config.faults
        for kind in (
            "rate_limited",
            "server_error",
            "overloaded",
            "dropped",
            "slow",
            "malformed",
            "refusal",
            "quota",
        ):
            p = getattr(f, kind)
            if roll < p:
                return kind
            roll -= p
        return "ok"

    def _reply(
        self,
        proto: Protocol,
        call: Call,
        status: int,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        self.log.statuses[(proto.name, status)] += 1
        self.log.replies.append((time.monotonic(), proto.name, status))
        if status >= 400 and self.config.echo_key and call.credential:
            body = echoed(body, call.credential)
        return web.Response(
            status=status,
            body=orjson.dumps(body),
            content_type="application/json",
            headers={**(headers or {}), **self.config.headers},
        )

    def _limit_headers(self, proto: Protocol, window: Window) -> dict[str, str]:
        req_left, req_reset, tok_left, tok_reset = window.remaining()
        c = self.config
        per_minute = 60.0 / c.period_s  # providers state limits per minute, whatever the window
        if proto.name == "openai":
            h = {}
            if c.rpm is not None:
                h |= {
                    "x-ratelimit-limit-requests": str(round(c.rpm * per_minute)),
                    "x-ratelimit-remaining-requests": str(req_left),
                    "x-ratelimit-reset-requests": f"{req_reset * 1000:.0f}ms",
                }
            if c.tpm is not None:
                h |= {
                    "x-ratelimit-limit-tokens": str(round(c.tpm * per_minute)),
                    "x-ratelimit-remaining-tokens": str(tok_left),
                    "x-ratelimit-reset-tokens": f"{tok_reset * 1000:.0f}ms",
                }
            return h
        if proto.name == "anthropic":
            at = lambda s: (datetime.now(UTC) + timedelta(seconds=s)).isoformat()  # noqa: E731
            h = {}
            if c.rpm is not None:
                h |= {
                    "anthropic-ratelimit-requests-limit": str(round(c.rpm * per_minute)),
                    "anthropic-ratelimit-requests-remaining": str(req_left),
                    "anthropic-ratelimit-requests-reset": at(req_reset),
                }
            if c.tpm is not None:
                h |= {
                    "anthropic-ratelimit-tokens-limit": str(round(c.tpm * per_minute)),
                    "anthropic-ratelimit-tokens-remaining": str(tok_left),
                    "anthropic-ratelimit-tokens-reset": at(tok_reset),
                }
            return h
        return {}  # Gemini reports limits only in its 429 body

    async def handle(self, request: web.Request, proto: Protocol) -> web.StreamResponse:
        raw = await request.read()
        try:
            call = proto.parse(request, orjson.loads(raw))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            return self._reply(
                proto, Call("", "", "", 0, None), 400, proto.error(400, f"bad request: {exc}")
            )
        self.log.arrivals.append((time.monotonic(), proto.name, call.model))
        self.log.bodies.append(orjson.loads(raw))  # a copy: the respondent reads it as sent
        keys = self.config.keys
        if keys is not None and call.credential not in keys:
            return self._reply(proto, call, 401, proto.error(401, "invalid api key"))
        if (refused := self.gate(proto, call, self.log.bodies[-1])) is not None:
            return self._reply(proto, call, *refused)
        window = self._window(proto.name, call.credential)
        prompt_tokens = self.prompt_tokens(call)
        verdict = window.admit(prompt_tokens + call.max_tokens)
        if not verdict.admitted:
            return self._too_many(proto, call, window, verdict.retry_after_s)
        self.log.admitted_tokens.append(
            (time.monotonic(), proto.name, prompt_tokens + call.max_tokens)
        )
        kind = self._fault()
        self.log.served[kind] += 1
        if self.config.latency_s:
            await asyncio.sleep(self.config.latency_s)
        f = self.config.faults
        if kind == "rate_limited":
            return self._too_many(proto, call, window, f.retry_after_s, f.retry_after)
        if kind == "quota":
            return self._reply(proto, call, *proto.quota())
        if kind == "server_error":
            return self._reply(proto, call, 500, proto.error(500, "internal error"))
        if kind == "overloaded":
            return self._reply(
                proto,
                call,
                proto.overload_status,
                proto.error(proto.overload_status, "overloaded"),
                {"retry-after": f.retry_after or f"{f.retry_after_s:.3f}"},
            )
        if kind == "dropped":
            request.transport.close()
            return web.Response()
        if kind == "slow":
            await asyncio.sleep(f.slow_s)
        body, used = self.answer(proto, call, self.log.bodies[-1], kind)
        window.settle(verdict.entry, used)
        return self._reply(proto, call, 200, body, self._limit_headers(proto, window))

    # --- what the online route and a batch item share ----------------------------------------
    def prompt_tokens(self, call: Call) -> int:
        return round(tokens(call.prompt) * self.config.token_ratio)

    def gate(
        self, proto: Protocol, call: Call, request: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]] | None:
        """The provider's error for a call no model can answer (an unknown model, parameters a
        reasoning model refuses, given its `request` body, a prompt over the context length),
        or None."""
        if call.model.startswith("missing-"):
            return 404, proto.error(404, f"model {call.model} not found")
        if request is not None and (no := reasoning.refuse(proto, call, request, self.config)):
            return no
        prompt_tokens = self.prompt_tokens(call)
        if self.config.context_tokens is not None and prompt_tokens > self.config.context_tokens:
            self.log.served["too_long"] += 1
            return proto.too_long(prompt_tokens, self.config.context_tokens)
        return None

    def answer(
        self, proto: Protocol, call: Call, request: dict[str, Any], kind: str = "ok"
    ) -> tuple[dict[str, Any], int]:
        """The 200 body answering `call` (its request body as sent: what the respondent hook
        reads), and the tokens it used (prompt + completion, thinking included)."""
        hook = self.config.respondent
        text = (
            (hook(proto.name, request) if hook else None)
            or self._scripted(call.prompt)
            or answer(call.user_prompt, call.schema, self.rng)
        )
        if call.echo:
            call.logprobs = echo_logprobs(call.prompt, self.config.logprob_bonus)
        if kind == "malformed":
            text = f"Let me think. The answer is roughly {self.rng.randint(1, 999)}."
            self.log.malformed_texts.add(text)
        prompt_tokens = self.prompt_tokens(call)
        completion_tokens = round(tokens(text) * self.config.token_ratio)
        how = reasoning.plan(proto, call, request, self.config)
        thoughts = 0
        if proto.name == "gemini":
            thoughts = min(how.tokens if how else self.config.thoughts_tokens, call.max_tokens)
        if thoughts and thoughts + completion_tokens > call.max_tokens:
            text, completion_tokens = None, 0  # thinking left no room for any answer (MAX_TOKENS)
        served = dataclasses.replace(call, model=self.config.served_as.get(call.model, call.model))
        body = proto.success(
            served,
            text,
            prompt_tokens,
            completion_tokens,
            refused=kind == "refusal",
            thoughts=thoughts,
        )
        if proto.name == "openai" and self.config.system_fingerprint:
            body["system_fingerprint"] = self.config.system_fingerprint
        used = min(thoughts + completion_tokens, call.max_tokens)
        if how is not None:  # its trace, the tokens it spent, and OpenAI's length cut
            used = reasoning.dress(body, how, self.config, proto.name, request, call, used)
        return body, prompt_tokens + used

    def _too_many(
        self, proto: Protocol, call: Call, window: Window, wait: float, verbatim: str | None = None
    ) -> web.Response:
        """A 429 asking for `wait` seconds, or for whatever `verbatim` says (in Retry-After or
        Gemini's retryDelay)."""
        headers = {"retry-after": verbatim or f"{wait:.3f}", **self._limit_headers(proto, window)}
        if proto.name == "openai" and verbatim is None:
            headers["retry-after-ms"] = f"{wait * 1000:.0f}"
        body = proto.error(429, "rate limit exceeded", retry_after=verbatim or f"{wait:.3f}s")
        return self._reply(proto, call, 429, body, headers)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 2**20)
        self.batch.add(app)  # first: Gemini's batch route shares the online route's path
        for proto in PROTOCOLS:
            app.router.add_post(proto.route, self._handler(proto))
        return app

    def _handler(self, proto: Protocol):
        async def handler(request: web.Request) -> web.StreamResponse:
            return await self.handle(request, proto)

        return handler

    async def start(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def start_in_thread(self) -> Emulator:
        """For tests: serve from a background thread's own event loop."""
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start())
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=serve, daemon=True).start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self.batch.jobs.close()

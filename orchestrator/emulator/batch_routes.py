"""The three batch APIs on the emulator's port, in each provider's own shapes: OpenAI's files and
batches (batch_openai.py), Anthropic's message batches (batch_anthropic.py), Gemini's batch mode
with inline requests (batch_gemini.py). This module registers their routes and wraps each:
credentials, errors in the protocol's shape, the call log, and the replies a test delays or
drops. The jobs themselves live in batch.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from orchestrator.emulator.batch import Job, Jobs
from orchestrator.emulator.batch_anthropic import AnthropicRoutes
from orchestrator.emulator.batch_gemini import GeminiRoutes
from orchestrator.emulator.batch_http import Problem, answer
from orchestrator.emulator.batch_openai import OpenAIRoutes
from orchestrator.emulator.protocols import Anthropic, Gemini, OpenAI, bearer, echoed, google_key

if TYPE_CHECKING:
    from orchestrator.emulator.server import Emulator

Handler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


class BatchRoutes(OpenAIRoutes, AnthropicRoutes, GeminiRoutes):
    def __init__(self, emulator: Emulator) -> None:
        self.emulator, self.jobs = emulator, Jobs(emulator)
        self.openai, self.anthropic, self.gemini = OpenAI(), Anthropic(), Gemini()

    def add(self, app: web.Application) -> None:
        """Registered before the online routes: Gemini's batchGenerateContent shares their path."""
        r = app.router
        o, a, g = "openai", "anthropic", "gemini"
        r.add_post("/v1/files", self._route(o, "upload", self.upload))
        r.add_get("/v1/files/{id}", self._route(o, "file", self.file))
        r.add_get("/v1/files/{id}/content", self._route(o, "content", self.content))
        r.add_delete("/v1/files/{id}", self._route(o, "delete", self.delete_file))
        r.add_post("/v1/batches", self._route(o, "create", self.openai_create))
        r.add_get("/v1/batches", self._route(o, "list", self.openai_list))
        r.add_get("/v1/batches/{id}", self._route(o, "poll", self.openai_get))
        r.add_post("/v1/batches/{id}/cancel", self._route(o, "cancel", self.openai_cancel))
        r.add_post("/v1/messages/batches", self._route(a, "create", self.anthropic_create))
        r.add_get("/v1/messages/batches", self._route(a, "list", self.anthropic_list))
        r.add_get("/v1/messages/batches/{id}", self._route(a, "poll", self.anthropic_get))
        r.add_get(
            "/v1/messages/batches/{id}/results", self._route(a, "results", self.anthropic_results)
        )
        r.add_post(
            "/v1/messages/batches/{id}/cancel", self._route(a, "cancel", self.anthropic_cancel)
        )
        r.add_post(
            "/v1beta/models/{model}:batchGenerateContent",
            self._route(g, "create", self.gemini_create),
        )
        r.add_get("/v1beta/batches", self._route(g, "list", self.gemini_list))
        r.add_get("/v1beta/batches/{id}", self._route(g, "poll", self.gemini_get))
        r.add_post("/v1beta/batches/{id}:cancel", self._route(g, "cancel", self.gemini_cancel))

    def _route(self, protocol: str, name: str, handler: Handler):
        proto = getattr(self, protocol)

        async def route(request: web.Request) -> web.StreamResponse:
            credential = {
                "openai": bearer,
                "anthropic": lambda r: r.headers.get("x-api-key", ""),
                "gemini": google_key,
            }[protocol](request)
            keys = self.emulator.config.keys
            cap = self.emulator.config.batch.body_cap
            if cap is not None and (request.content_length or 0) > cap:
                self.emulator.log.batch_calls[(protocol, name, 413)] += 1
                return web.Response(
                    status=413,
                    text="<html><head><title>413 Request Entity Too Large</title></head>"
                    "<body><center><h1>413 Request Entity Too Large</h1></center></body></html>",
                    content_type="text/html",
                )
            try:
                if keys is not None and credential not in keys:
                    raise Problem(401, "invalid api key")
                if protocol == "anthropic" and "anthropic-version" not in request.headers:
                    raise Problem(400, "bad request: missing anthropic-version header")
                response = await handler(request, credential)
            except Problem as p:
                body = proto.error(p.status, str(p))
                if p.kind and protocol == "anthropic":
                    body["error"]["type"] = p.kind
                if self.emulator.config.echo_key and credential:
                    body = echoed(body, credential)
                response = answer(body, p.status)
            self.emulator.log.batch_calls[(protocol, name, response.status)] += 1
            b = self.emulator.config.batch
            if delay := b.reply_delay_s.get(name):
                await asyncio.sleep(delay)
            if b.drop_replies.get(name, 0) > 0:  # the work is done; the answer is lost
                b.drop_replies[name] -= 1
                request.transport.close()
                return web.Response()
            return response

        return route

    def _job(self, protocol: str, job_id: str, credential: str) -> Job:
        job = self.jobs.get(protocol, job_id, credential)
        if job is None:
            raise Problem(404, f"No batch found with id '{job_id}'.")
        return job

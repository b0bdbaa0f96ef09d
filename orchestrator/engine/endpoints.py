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

from orchestrator.engine.files import write_file
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
    try:
        mark = (run_dir / SEAL).read_bytes()[:100].decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return sealed(mark, manifest)


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
    """Every URL a run of this campaign calls with the user's credentials, model by model."""
    models = [(m.label, m) for m in campaign.config.models]
    models += [(f"{field} ({m.label})", m) for field, m in campaign.config.helpers()]
    found = []
    for label, model in models:
        secrets = _secrets(model)
        for url in _urls(model):
            found.append(Endpoint(label, url, secrets, _official(url)))
    return found


def _secrets(model: ModelConfig) -> tuple[str, ...]:
    names = [model.api_key_env] if model.api_key_env else []
    return tuple(names + sorted((model.headers_env or {}).values()))


def _urls(model: ModelConfig) -> list[str]:
    if model.provider in (None, "local", "simulated"):
        return []  # no key leaves the machine: the embedded model's servers are the run's own
    urls = model.base_urls or [model.base_url or DEFAULT_URLS.get(model.provider, "")]
    return [u for u in urls if u]


def _official(url: str) -> bool:
    parts = urlsplit(url)
    return (
        parts.scheme == "https"
        and parts.port in (None, 443)
        and ((parts.hostname or "") in official_hosts())
    )


@cache
def official_hosts() -> frozenset[str]:
    """The hosts of the providers' own APIs: the built-in presets' https URLs and the default
    URLs, never a loopback one or a placeholder (Azure's YOUR-RESOURCE)."""
    from orchestrator.spec.builtin import builtin_dir
    from orchestrator.spec.loading import load_toml

    presets = load_toml(builtin_dir("configs") / "presets.toml", "presets file")
    urls = [p.get("base_url", "") for p in presets.values() if isinstance(p, dict)]
    hosts = set()
    for url in [*urls, *DEFAULT_URLS.values()]:
        parts = urlsplit(str(url))
        if parts.scheme == "https" and parts.hostname and "your-" not in parts.hostname:
            hosts.add(parts.hostname)
    return frozenset(hosts)

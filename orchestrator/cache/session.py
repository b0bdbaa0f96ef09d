"""The response cache in a run: which file, which providers it wraps, and the line it ends with.

A run named by date (--run-id auto, the nightly runs) never reads the cache: it exists to see
today's model, not last week's answers. It still keeps what it pays for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.markup import escape

from orchestrator.cache.provider import CachedProvider
from orchestrator.cache.store import ResponseCache, default_path
from orchestrator.engine.caller import Helper
from orchestrator.providers.base import Provider
from orchestrator.spec.campaign import Campaign

H = TypeVar("H", bound=Helper)
# Not wrapped: the simulated respondent draws an answer faster than the cache could find it,
# and may draw per run (draws = "run"), which a cached answer would undo.
UNCACHED = ("simulated",)


def cache_path(campaign: Campaign) -> Path | None:
    """The campaign's cache file, or None when it has none."""
    setting = campaign.config.cache
    if setting is False:
        return None
    if setting is True:
        return default_path()
    base = campaign.source.parent if campaign.source else Path.cwd()
    return base / Path(setting).expanduser()


class RunCache:
    """Wraps a run's providers around one cache file (or leaves them as they are when off)."""

    def __init__(self, campaign: Campaign, console: Console) -> None:
        self.path = cache_path(campaign)
        self.console = console
        self.store: ResponseCache | None = None
        if self.path is not None:
            # the run that paid, as campaign/run-id: run ids alone repeat across campaigns
            self.store = ResponseCache(
                self.path,
                f"{campaign.config.name}/{campaign.config.run_id}",
                read=not campaign.nightly,
                warn=self._warn,
            )
        self.models = {m.key: m for m in campaign.config.models}

    def _warn(self, message: str) -> None:
        self.console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)

    def _wrap(self, provider: Provider, model) -> Provider:
        if self.store is None or not self.store.usable or model.provider in UNCACHED:
            return provider
        return CachedProvider(provider, model, self.store)

    def wrap(self, providers: dict[str, Provider]) -> dict[str, Provider]:
        """The run's providers by model key, each answering from the cache where it can."""
        return {key: self._wrap(p, self.models[key]) for key, p in providers.items()}

    def helper(self, helper: H | None) -> H | None:
        """An extractor or screener, its provider wrapped too."""
        if helper is not None:
            helper.provider = self._wrap(helper.provider, helper.model)
        return helper

    def summary(self) -> str | None:
        store = self.store
        if store is None:
            return None
        if not store.read:
            how = "not read (a run named by date sees today's model)"
        else:
            how = f"answered {store.hits:,} of {store.lookups:,} calls from earlier runs"
        if store.failed:
            return f"response cache {self.path}: off after the warning above"
        refused = (
            f"; {store.refused:,} rows it could not trust were paid again" if store.refused else ""
        )
        return f"response cache on, {self.path}: {how}{refused}; kept {store.stored:,} new answers"

    def close(self) -> None:
        if self.store is not None:
            self.store.close()  # the last answers written: a failure there warns first
            self.console.print(escape(self.summary()), highlight=False)


@contextmanager
def run_cache(campaign: Campaign, console: Console) -> Iterator[RunCache]:
    """The campaign's cache for one run; closed (its last answers written) when the run ends,
    with one line saying what it did."""
    cache = RunCache(campaign, console)
    try:
        yield cache
    finally:
        cache.close()

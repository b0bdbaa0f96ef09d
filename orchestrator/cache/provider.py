"""A provider wrapped by the response cache: what it answers is kept, and `lookup` finds what an
earlier run paid for.

Lookups are not made inside complete() and score(): calls.py makes them before the call waits
for its key's rate gate, so an answer the cache holds costs no request slot, no token budget and
no retry. complete() and score() call the provider and keep its answer. Only answers are kept:
an error (a refusal too) is raised before anything is stored.
"""

from __future__ import annotations

from orchestrator.cache.keys import cell_digest, completion_key, model_part, score_key
from orchestrator.cache.store import ResponseCache
from orchestrator.plan import Cell, Task
from orchestrator.providers.base import Completion, Provider
from orchestrator.providers.http import HTTPProvider
from orchestrator.spec.campaign import ModelConfig


class CachedProvider:
    def __init__(self, inner: Provider, model: ModelConfig, cache: ResponseCache) -> None:
        self.inner, self.model, self.cache = inner, model, cache
        self._model_part = model_part(model)
        self._label = model.label
        self._cells: dict[Cell, bytes] = {}

    def _key(self, task: Task, scored: tuple[str, str] | None) -> bytes:
        if scored is not None:
            return score_key(self._model_part, *scored)
        cell = task.cell
        part = self._cells.get(cell)
        if part is None:
            part = cell_digest(self._model_part, cell)
            if cell.cacheable:  # a study's one-off cells (retries, screening) are not kept
                self._cells[cell] = part
        # The seed the provider sends with this sample (HTTPProvider.seed_for reads the model only).
        return completion_key(part, task.sample, HTTPProvider.seed_for(self, task))

    def lookup(self, task: Task, scored: tuple[str, str] | None = None) -> Completion | None:
        """The answer an earlier run was given to this call (`scored`: the scoring call of this
        text and continuation), or None."""
        if not self.cache.read or not self.cache.usable:
            return None
        return self.cache.get(self._key(task, scored))

    async def start(self) -> None:
        await self.inner.start()

    async def complete(self, task: Task) -> Completion:
        completion = await self.inner.complete(task)
        self.keep(task, completion)
        return completion

    def keep(self, task: Task, completion: Completion) -> None:
        """Keep the task's answer (made here, or come back in a batch)."""
        if self.cache.usable:
            self.cache.put(self._key(task, None), completion, self._label)

    async def score(self, task: Task, text: str, continuation: str) -> Completion:
        completion = await self.inner.score(task, text, continuation)
        if self.cache.usable:
            self.cache.put(self._key(task, (text, continuation)), completion, self._label)
        return completion

    async def aclose(self) -> None:
        try:
            self.cache.flush()
        finally:
            await self.inner.aclose()

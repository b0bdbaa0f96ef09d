"""What a run shares with whoever watches it (progress display, CLI, budget)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class RunState:
    """Shared by the engine and whoever watches it (progress display, CLI)."""

    retries: defaultdict = field(default_factory=lambda: defaultdict(int))  # by model key
    fatal: dict[str, str] = field(default_factory=dict)  # model key -> message
    interrupted_by: int | None = None
    budget: float | None = None  # USD for the whole run
    spend: float = 0.0  # USD recorded so far, earlier sessions included
    budget_reached: bool = False
    # model key -> what its batches in flight are doing, as the batch side last polled them
    batches: dict[str, str] = field(default_factory=dict)
    on_batches: Callable[[], None] | None = None  # told when `batches` changes (progress)

    def batches_now(self, key: str, summary: str | None) -> None:
        """The model's batches in flight (None: it has none), for whoever watches."""
        before = self.batches.get(key)
        if summary is None:
            self.batches.pop(key, None)
        else:
            self.batches[key] = summary
        if summary != before and self.on_batches is not None:
            self.on_batches()

"""What a run shares with whoever watches it (progress display, CLI, budget)."""

from __future__ import annotations

from collections import defaultdict
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

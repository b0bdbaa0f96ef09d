"""A job file's optional `plausibleRange`: [low, high], the answers to a number question that
make sense ("estimate the price": [0, 100000]). The analysis counts answers outside it beside
the mean; it never drops them (the seeds' measures take every valid answer)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError

FIX = 'give two numbers in the answer\'s unit, low first: "plausibleRange": [0, 100000]'


def plausible_range(
    value: Any, path: Path, field: str, numeric: bool
) -> tuple[float, float] | None:
    """The range as (low, high), None when absent, or a UserError naming the file and field."""
    if value is None:
        return None
    if not numeric:
        raise UserError(
            "plausibleRange applies to questions answered with a number only",
            file=path,
            field=field,
            fix="remove it here, or put it on an experiment whose answers are numbers",
        )
    numbers = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )
    if not numbers:
        raise UserError(
            f"plausibleRange must be a list of two numbers (got {value!r})",
            file=path,
            field=field,
            fix=FIX,
        )
    low, high = (float(v) for v in value)
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise UserError(
            f"plausibleRange needs finite numbers with low < high (got [{value[0]}, {value[1]}])",
            file=path,
            field=field,
            fix=FIX,
        )
    return low, high

"""How numbers are shown in reports and terminal tables."""
from __future__ import annotations

import math


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}"

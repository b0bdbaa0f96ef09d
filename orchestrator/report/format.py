"""How numbers are shown in reports and terminal tables."""

from __future__ import annotations

import math


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if abs(x) < 1000:
        return f"{x:.{digits}g}"
    # thousands separators up to a billion; beyond, a model's runaway answer (1.5e20) would
    # print as a 27-character number that fills a table column
    return f"{x:,.0f}" if abs(x) < 1e9 else f"{x:.{digits}e}"

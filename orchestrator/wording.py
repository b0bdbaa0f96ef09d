"""How prompts word their answer format, read the same way by the job readers (which plan a
rating's scale from it) and by the emulator (which answers as a model reading the prompt
would): one reading, so a rehearsal cannot hide a scale the plan got wrong."""

from __future__ import annotations

import re

# A rating scale as prompts state it: "1 = poor and 7 = good", "from 1 (very unappealing) to 10
# (very appealing)", "on a 1-10 scale", "a scale of 1 to 10", "between 1 and 10".
_RATING_SCALES = (
    re.compile(r"(\d+)\s*=\s*[^.;]*?\band\s+(\d+)\s*="),
    re.compile(r"\bfrom\s+(\d+)\b[^.;]*?\bto\s+(\d+)\b", re.I),
    re.compile(
        r"\b(\d+)\s*(?:-|–|to)\s*(\d+)[- ]point\b|\b(\d+)\s*(?:-|–)\s*(\d+)\s+scale\b", re.I
    ),
    re.compile(r"\bscale\s+(?:of|from)\s+(\d+)\s*(?:-|–|to)\s*(\d+)\b", re.I),
    re.compile(r"\bbetween\s+(\d+)\s+and\s+(\d+)\b", re.I),
)


def rating_scale(prompt: str) -> tuple[int, int] | None:
    """The (lowest, highest) rating a prompt's wording states, or None if it states none that
    this reads, or two different ones (then the job must declare it: a guessed scale loses
    answers outside it)."""
    scales = []
    for pattern in _RATING_SCALES:
        for found in pattern.finditer(prompt):
            lo, hi = (int(n) for n in found.groups() if n is not None)
            if -10 <= lo <= 10 and lo < hi <= lo + 100:  # a scale, not a span of years
                scales.append((lo, hi))
    # two different readings ("from 3 to 5 people ... on a 1-10 scale"): none is guessed
    return scales[0] if scales and len(set(scales)) == 1 else None

"""What a scored task's failed attempt paid for (engine/scoring.py), as the resume scan finds it
in the results file (store.scan_results) without loading the scoring machinery."""

from __future__ import annotations

from dataclasses import dataclass

import orjson


@dataclass(frozen=True)
class Paid:
    """The option scores a failed attempt of a task paid for, each with the model string and
    fingerprint that served it: a resume reuses one only while the model serves the same."""

    scores: dict[str, dict]

    def stale(self, served: str | None, fingerprint: str | None) -> list[str]:
        """The options whose scores another model (or build) served than `served` now; a score
        written without its server (before these were recorded) is stale too."""
        return [
            option
            for option, entry in self.scores.items()
            if "servedModel" not in entry
            or entry["servedModel"] != served
            or entry.get("systemFingerprint") != fingerprint
        ]


def paid_in(line: bytes) -> Paid | None:
    """The option scores a scoring model's `failed` record holds: what that attempt of its task
    paid for (a task id pins the prompt and the model). A line the resume scan passed by its
    layout but that is no JSON after all holds nothing reusable (the readers name it)."""
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    found = {
        entry["option"]: entry
        for entry in (rec.get("response") or {}).get("scores") or []
        if isinstance(entry, dict) and isinstance(entry.get("option"), str)
    }
    return Paid(found) if found else None

"""What a scored task's failed attempt paid for (engine/scoring.py), as the resume scan finds it
in the results file (store.scan_results) without loading the scoring machinery."""

from __future__ import annotations

from dataclasses import dataclass

import orjson


@dataclass(frozen=True)
class Paid:
    """The option scores a failed attempt of a task paid for, and who served them: a resume
    reuses them only while the model serves the same (its name and fingerprint)."""

    scores: dict[str, dict]
    served: str | None = None
    fingerprint: str | None = None

    def still_valid(self, served: str | None, fingerprint: str | None) -> bool:
        return (None in (self.served, served) or self.served == served) and (
            None in (self.fingerprint, fingerprint) or self.fingerprint == fingerprint
        )


def paid_in(line: bytes) -> Paid | None:
    """The option scores a scoring model's `failed` record holds: what that attempt of its task
    paid for (a task id pins the prompt and the model; `Paid` says who served them)."""
    rec = orjson.loads(line)
    found = {
        entry["option"]: entry
        for entry in (rec.get("response") or {}).get("scores") or []
        if isinstance(entry, dict) and isinstance(entry.get("option"), str)
    }
    if not found:
        return None
    return Paid(found, rec.get("servedModel"), rec.get("systemFingerprint"))

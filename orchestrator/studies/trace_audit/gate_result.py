"""The gate's verdict (gate.py): its row schemas and GateResult, written as gate.json."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from orchestrator.studies.trace_audit.gate_stats import ALPHA

CATCH_SCHEMA = {
    "bias": pl.String,
    "ref_flagged": pl.Int64,
    "escalated": pl.Int64,  # flagged traces with no validated audit in either run: left out
    "compared": pl.Int64,
    "caught_baseline": pl.Int64,
    "caught_now": pl.Int64,
    "lost": pl.Int64,
    "gained": pl.Int64,
    "mcnemar_p": pl.Float64,
    "rise": pl.Float64,
    "p": pl.Float64,
    "p_adjusted": pl.Float64,
    # with --baseline-again: the flagged traces' mean now less the baseline runs' mean, and the
    # rise a catch failure must exceed (gate_tolerance.py); null without
    "runs_rise": pl.Float64,
    "tolerance": pl.Float64,
    "floor": pl.Boolean,
    "failed": pl.Boolean,
}
SHIFT_SCHEMA = {
    "bias": pl.String,
    "n": pl.Int64,
    "baseline_mean": pl.Float64,
    "current_mean": pl.Float64,
    "difference": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p": pl.Float64,
    "p_adjusted": pl.Float64,
    "significant": pl.Boolean,
    # with --baseline-again: the mean now less the baseline runs' mean, held to the larger of
    # --tolerance and the learned one; without, `difference` is held to --tolerance
    "runs_difference": pl.Float64,
    "tolerance": pl.Float64,
    "beyond_tolerance": pl.Boolean,
    "accepted": pl.String,
    "failed": pl.Boolean,
}


@dataclass
class GateResult:
    """The gate's verdict: ok when `failures` is empty."""

    ok: bool
    failures: list[str]
    missed: pl.DataFrame  # the lost catches: trace_id, bias, baseline_score, current_score
    flipped: pl.DataFrame  # every flipped catch, `change` "lost" or "gained"
    catches: pl.DataFrame  # one row per bias, CATCH_SCHEMA
    shifts: pl.DataFrame  # one row per bias, SHIFT_SCHEMA
    only_current: list[str]
    only_baseline: list[str]
    reference_changed: list[dict]  # shared (trace, bias) whose reference labels differ
    tolerance: float
    alpha: float = ALPHA
    accepted: dict[str, str] = field(default_factory=dict)
    # reference-flagged (trace, bias) escalated in either run, left out of the catch comparison
    escalated: pl.DataFrame = field(default_factory=pl.DataFrame)
    escalation: dict = field(default_factory=dict)  # the escalation test
    warnings: list[str] = field(default_factory=list)  # what the gate could not check
    learned: pl.DataFrame | None = None  # the learned tolerance (gate_tolerance.py), if any

    @property
    def flipped_traces(self) -> list[str]:
        """The traces to audit again, each once."""
        return sorted(set(self.flipped["trace_id"].to_list()))

    def to_json(self) -> dict:
        """The verdict as JSON-ready data, keys in camelCase as in the run folder's files."""
        rows = {
            "missed": self.missed.to_dicts(),
            "flipped": self.flipped.to_dicts(),
            "catches": self.catches.to_dicts(),
            "shifts": self.shifts.to_dicts(),
            "escalated": self.escalated.to_dicts(),
            "referenceChanged": self.reference_changed,
        }
        return {
            "ok": self.ok,
            "failures": self.failures,
            "warnings": self.warnings,
            **{k: [_camel(r) for r in v] for k, v in rows.items()},
            "escalation": _camel(self.escalation),
            "flippedTraces": self.flipped_traces,
            "onlyCurrent": self.only_current,
            "onlyBaseline": self.only_baseline,
            "alpha": self.alpha,
            "tolerance": self.tolerance,
            "accepted": self.accepted,
            "learned": None
            if self.learned is None
            else [_camel(r) for r in self.learned.to_dicts()],
        }


def _camel(row: dict) -> dict:
    def key(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(part.title() for part in rest)

    return {key(k): v for k, v in row.items()}

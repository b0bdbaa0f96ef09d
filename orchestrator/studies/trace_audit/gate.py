"""The audit regression gate (issue 14, item 10): a current audit of the golden set against a
baseline one, as the seed asks ("failing the pipeline if previously-caught biases are missed or
if audit scores shift unexpectedly without explanation").

Both inputs are frames like agreement.py's: one row per (trace, bias), `judge_score` null where
the judge gave no validated audit. Only traces in both runs are compared; the others are listed.
Two checks:

- missed: the reference flags the bias, the baseline judge caught it (score <= 2) and the
  current one does not (score > 2, or no validated audit now: an escalation is not a catch the
  gate can count on). Each is a failure.
- shifts: per bias, the paired mean difference current - baseline over the traces both judges
  validated, with a paired-t 95% CI. Beyond `tolerance` it fails unless `accepted` explains it.
  The point estimate is held to the tolerance, not the CI: a gate that needs proof of a shift
  would pass every shift on a small golden set. A bias no trace lets us compare fails too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from orchestrator.analysis.stats import t_interval
from orchestrator.studies.trace_audit.agreement import FLAG_AT, check_frame
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

_NOISE = 1e-9  # a mean of integer differences at exactly the tolerance is within it

_SHIFT_SCHEMA = {
    "bias": pl.String,
    "n": pl.Int64,
    "baseline_mean": pl.Float64,
    "current_mean": pl.Float64,
    "difference": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "beyond_tolerance": pl.Boolean,
    "accepted": pl.String,
    "failed": pl.Boolean,
}


@dataclass
class GateResult:
    """The gate's verdict: ok when `failures` is empty."""

    ok: bool
    failures: list[str]
    missed: pl.DataFrame  # trace_id, bias, baseline_score, current_score (null: no audit now)
    shifts: pl.DataFrame  # one row per bias, _SHIFT_SCHEMA
    only_current: list[str]
    only_baseline: list[str]
    reference_changed: list[dict]  # shared (trace, bias) whose reference labels differ
    tolerance: float
    accepted: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The verdict as JSON-ready data, keys in camelCase as in the run folder's files."""
        rows = {
            "missed": self.missed.to_dicts(),
            "shifts": self.shifts.to_dicts(),
            "referenceChanged": self.reference_changed,
        }
        return {
            "ok": self.ok,
            "failures": self.failures,
            **{k: [_camel(r) for r in v] for k, v in rows.items()},
            "onlyCurrent": self.only_current,
            "onlyBaseline": self.only_baseline,
            "tolerance": self.tolerance,
            "accepted": self.accepted,
        }


def _camel(row: dict) -> dict:
    def key(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(part.title() for part in rest)

    return {key(k): v for k, v in row.items()}


def _pairs(current: pl.DataFrame, baseline: pl.DataFrame, shared: list[str]) -> pl.DataFrame:
    """One row per (shared trace, bias) in either run. The current reference wins where the
    golden set's labels changed between the runs (they are the labels as they stand); a row
    absent from the current run reads as no validated audit now."""
    cols = ["trace_id", "bias", "judge_score", "ref_score", "ref_flag"]
    now = current.filter(pl.col("trace_id").is_in(shared)).select(cols)
    then = baseline.filter(pl.col("trace_id").is_in(shared)).select(cols)
    joined = now.join(then, on=["trace_id", "bias"], how="full", coalesce=True, suffix="_baseline")
    return joined.select(
        "trace_id",
        "bias",
        current_score=pl.col("judge_score"),
        baseline_score=pl.col("judge_score_baseline"),
        ref_flag=pl.coalesce("ref_flag", "ref_flag_baseline"),
        ref_changed=(pl.col("ref_score") != pl.col("ref_score_baseline"))
        | (pl.col("ref_flag") != pl.col("ref_flag_baseline")),
    ).sort("trace_id", pl.col("bias").replace_strict(BIAS_TYPES, range(4)))


def missed_catches(pairs: pl.DataFrame) -> pl.DataFrame:
    caught = pl.col("baseline_score") <= FLAG_AT
    lost = (pl.col("current_score") > FLAG_AT).fill_null(True)
    return pairs.filter(pl.col("ref_flag") & caught.fill_null(False) & lost).select(
        "trace_id", "bias", "baseline_score", "current_score"
    )


def _shift(pairs: pl.DataFrame, bias: str, tolerance: float, accepted: dict[str, str]) -> dict:
    both = pairs.filter(
        (pl.col("bias") == bias)
        & pl.col("current_score").is_not_null()
        & pl.col("baseline_score").is_not_null()
    )
    now, then = both["current_score"].to_numpy(), both["baseline_score"].to_numpy()
    row = {
        "bias": bias,
        "n": both.height,
        "baseline_mean": None,
        "current_mean": None,
        "difference": None,
        "ci_low": None,
        "ci_high": None,
        "beyond_tolerance": None,
        "accepted": accepted.get(bias),
    }
    if both.height == 0:
        return {**row, "failed": bias not in accepted}
    diff = now - then
    low, high = (float(x) for x in t_interval(diff))
    beyond = bool(abs(diff.mean()) - tolerance > _NOISE)
    return {
        **row,
        "baseline_mean": float(then.mean()),
        "current_mean": float(now.mean()),
        "difference": float(diff.mean()),
        "ci_low": None if np.isnan(low) else low,
        "ci_high": None if np.isnan(high) else high,
        "beyond_tolerance": beyond,
        "failed": beyond and bias not in accepted,
    }


def _missed_text(row: dict) -> str:
    now = "no validated audit" if row["current_score"] is None else f"scored {row['current_score']}"
    return (
        f"{row['trace_id']} {row['bias']}: caught in the baseline (scored "
        f"{row['baseline_score']}), missed now ({now})"
    )


def _shift_text(row: dict, tolerance: float) -> str:
    if row["n"] == 0:
        return f"{row['bias']}: no trace has a validated score in both runs to compare"
    ci = "" if row["ci_low"] is None else f"; 95% CI {row['ci_low']:+.2f} to {row['ci_high']:+.2f}"
    return (
        f"{row['bias']}: mean score moved {row['difference']:+.2f} (baseline "
        f"{row['baseline_mean']:.2f}, now {row['current_mean']:.2f}, {row['n']} trace{'s' * (row['n'] > 1)}{ci}), "
        f"beyond the tolerance {tolerance:g}, with no explanation"
    )


def _check_options(tolerance: float, accepted: dict[str, str]) -> None:
    if not tolerance >= 0:
        raise ValueError(f"the tolerance must be 0 or more, not {tolerance}")
    unknown = sorted(set(accepted) - set(BIAS_TYPES))
    if unknown:
        raise ValueError(f"accepted names unknown bias(es) {unknown}: use {BIAS_TYPES}")
    blank = sorted(b for b, why in accepted.items() if not str(why).strip())
    if blank:
        raise ValueError(f"an accepted shift needs its explanation: {blank}")


def gate(
    current: pl.DataFrame,
    baseline: pl.DataFrame,
    tolerance: float = 0.5,
    accepted: dict[str, str] | None = None,
) -> GateResult:
    """Compare an audit of the golden set with a baseline one; see the module docstring."""
    accepted = dict(accepted or {})
    _check_options(tolerance, accepted)
    check_frame(current)
    check_frame(baseline)
    ids_now, ids_then = set(current["trace_id"].to_list()), set(baseline["trace_id"].to_list())
    shared = sorted(ids_now & ids_then)
    pairs = _pairs(current, baseline, shared)
    missed = missed_catches(pairs)
    biases = [b for b in BIAS_TYPES if b in set(pairs["bias"].to_list())]
    shifts = pl.DataFrame(
        [_shift(pairs, b, tolerance, accepted) for b in biases], schema=_SHIFT_SCHEMA
    )
    failures = [] if shared else ["no golden trace is in both runs: nothing to compare"]
    failures += [_missed_text(r) for r in missed.iter_rows(named=True)]
    failures += [_shift_text(r, tolerance) for r in shifts.iter_rows(named=True) if r["failed"]]
    gone = sorted(ids_then - ids_now)
    if gone:  # an unfinished or sampled run could hide exactly the traces that regressed
        failures.append(
            f"{len(gone)} golden trace(s) of the baseline are not in this run "
            f"({', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''}): finish it, or "
            "audit the whole golden set"
        )
    changed = pairs.filter(pl.col("ref_changed").fill_null(False)).select("trace_id", "bias")
    return GateResult(
        ok=not failures,
        failures=failures,
        missed=missed,
        shifts=shifts,
        only_current=sorted(ids_now - ids_then),
        only_baseline=sorted(ids_then - ids_now),
        reference_changed=changed.to_dicts(),
        tolerance=tolerance,
        accepted=accepted,
    )

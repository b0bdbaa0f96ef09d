"""The audit regression gate: a current audit of the golden set against a baseline one, as seed
003 asks ("failing the pipeline if previously-caught biases are missed or if audit scores shift
unexpectedly without explanation"), built as tests so that judge noise alone does not fail it.

Both inputs are frames like agreement.py's: one row per (trace, bias), `judge_score` null where
the judge gave no validated audit (escalated). Only traces in both runs are compared (`only`
restricts both to a list, as for a re-audit of flipped traces). Per bias, over the shared traces:

- catches, over the reference-flagged traces validated in both runs: an exact one-sided
  sign-flip test of the paired score differences (current - baseline; higher is milder, so a
  rise is catching less). It fails when significant with more catches lost (caught then, score
  <= 2; missed now) than gained; the exact McNemar p of lost against gained is reported beside.
- shift: the paired mean difference over the traces both runs validated, a two-sided paired
  t-test with its 95% CI (untested under MIN_PAIRED traces); it fails when significant, beyond
  `tolerance` and not explained in `accepted`.
- escalations, per trace: an exact one-sided sign-flip test of how many of its biases have no
  validated audit now against then; it fails when the judge escalates significantly more.

`alpha` covers every rule that can fail an unchanged judge (gate_stats.py): the 4 catch tests
share CATCH_SHARE of it (Holm), the 4 shift tests SHIFT_SHARE (Holm), the escalation test the
rest. The sign-flip tests are exact or conservative when the two runs of a trace are
exchangeable; the shift's paired t is approximate (its level was measured, not proven:
docs/statistics.md). So an unchanged judge fails with probability at most about `alpha`, however
often it catches or escalates.
A run lacking baseline traces fails, deterministically (an unfinished run); a bias with nothing
to compare, or no longer caught where too few catches leave the test blind, is a warning.

Escalations are not misses. An escalated trace goes to a person (calibrate counts it as routed),
so the judge neither caught nor missed it. Counted as a miss, it failed an unchanged judge that
escalates 80% of traces (the default local judge escalates most) in 18-19% of re-audits. Left
out, it could hide misses: the escalation test fails a judge that escalates what it used to
audit, and the escalated flagged traces are listed.

No floor rule outside alpha. The old one (a bias caught on 3 or more baseline traces and on none
now failed, whatever the p) failed an unchanged judge that catches a flagged trace with chance
0.15 in 6-14% of re-audits. The sign-flip test is the floor now: with no other flagged trace
moving, k catches all lost is p = 2^-k, a failure from k = 7 (below 0.04/4). On the golden set
(14 flagged traces per bias) a judge that stopped catching a bias still failed every one of
1000 simulated re-audits (a rise of about +2.5 on its flagged traces); one that misses half of
them 50% (62% with noise drawn around the labels; before, 50% and 65%), a quarter 8% (7%). The
McNemar test as four more tests of the Holm family cost about 15 points of that power and
found no case the sign-flip test missed, so it is reported, not tested. Tables:
tests/test_trace_audit_gate_alpha.py and docs/statistics.md.

Runs that drift. Exchangeable runs vary trace by trace; a judge whose whole run shifts (every
score a little higher or lower from one run to the next) is outside alpha: at an SD of 0.2 it
failed 20% of re-audits at the fixed tolerance. `again`, re-audits by the baseline's judge,
gives each bias a tolerance learned from their spread (gate_tolerance.py), which a catch's rise
and a shift must also exceed, both measured against the baseline runs' mean.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from orchestrator.analysis.stats import t_interval
from orchestrator.studies.trace_audit.agreement import FLAG_AT, check_frame
from orchestrator.studies.trace_audit.gate_result import CATCH_SCHEMA, SHIFT_SCHEMA, GateResult
from orchestrator.studies.trace_audit.gate_stats import (
    ALPHA,
    CATCH_SHARE,
    ESCALATION_SHARE,
    MIN_PAIRED,
    SHIFT_SHARE,
    holm,
    mcnemar_loss_p,
    paired_t_p,
    signflip_p,
)
from orchestrator.studies.trace_audit.gate_text import catch_text, escalation_text, shift_text
from orchestrator.studies.trace_audit.gate_tolerance import learn_tolerance
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

__all__ = [
    "ALPHA",
    "CATCH_SHARE",
    "ESCALATION_SHARE",
    "MIN_PAIRED",
    "SHIFT_SHARE",
    "GateResult",
    "flipped_catches",
    "gate",
    "holm",
    "learn_tolerance",
    "mcnemar_loss_p",
    "paired_t_p",
    "signflip_p",
]

_EPS = 1e-9  # a mean of integer differences at exactly the tolerance is within it
_SCORES = ("baseline_score", "current_score")


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


def flipped_catches(pairs: pl.DataFrame) -> pl.DataFrame:
    """Reference-flagged (trace, bias) validated in both runs whose catch differs between them
    (an escalation is neither a catch nor a miss: see the module docstring)."""
    then, now = pl.col("baseline_score") <= FLAG_AT, pl.col("current_score") <= FLAG_AT
    both = pl.col("baseline_score").is_not_null() & pl.col("current_score").is_not_null()
    return pairs.filter(pl.col("ref_flag") & both & (then != now)).select(
        "trace_id",
        "bias",
        "baseline_score",
        "current_score",
        change=pl.when(then).then(pl.lit("lost")).otherwise(pl.lit("gained")),
    )


def _catches(flagged: np.ndarray, then: np.ndarray, now: np.ndarray, bias: str) -> dict:
    """The catch tests of one bias: per shared trace, whether the reference flags it and its
    baseline and current scores (NaN: no validated audit, left out)."""
    both = flagged & ~np.isnan(then) & ~np.isnan(now)
    caught_then, caught_now = both & (then <= FLAG_AT), both & (now <= FLAG_AT)
    lost, gained = int((caught_then & ~caught_now).sum()), int((~caught_then & caught_now).sum())
    rise = (now - then)[both]
    return {
        "bias": bias,
        "ref_flagged": int(flagged.sum()),
        "escalated": int((flagged & ~both).sum()),
        "compared": int(both.sum()),
        "caught_baseline": int(caught_then.sum()),
        "caught_now": int(caught_now.sum()),
        "lost": lost,
        "gained": gained,
        "mcnemar_p": mcnemar_loss_p(lost, gained),
        "rise": float(rise.mean()) if rise.size else None,
        "p": signflip_p(rise),
        "floor": bool(caught_then.any()) and not caught_now.any(),
    }


def _shift(then: np.ndarray, now: np.ndarray, bias: str, accepted: dict[str, str]) -> dict:
    """The shift test of one bias, over the traces validated in both runs."""
    both = ~np.isnan(then) & ~np.isnan(now)
    then, now = then[both], now[both]
    row = dict.fromkeys(SHIFT_SCHEMA, None) | {
        "bias": bias,
        "n": int(both.sum()),
        "accepted": accepted.get(bias),
    }
    if not both.any():
        return row
    diff = now - then
    low, high = (float(x) for x in t_interval(diff))
    return row | {
        "baseline_mean": float(then.mean()),
        "current_mean": float(now.mean()),
        "difference": float(diff.mean()),
        "ci_low": None if np.isnan(low) else low,
        "ci_high": None if np.isnan(high) else high,
        "p": paired_t_p(diff),
    }


def _escalation(pairs: pl.DataFrame) -> dict:
    """The escalation test: per trace, its biases with no validated audit now minus then, an
    exact one-sided sign-flip test (a whole trace escalates at once, so the unit is the trace,
    not the (trace, bias) pair)."""
    per_trace = pairs.group_by("trace_id").agg(
        then=pl.col("baseline_score").is_null().sum().cast(pl.Int64),
        now=pl.col("current_score").is_null().sum().cast(pl.Int64),
    )
    more = (per_trace["now"] - per_trace["then"]).to_numpy()
    return {
        "escalated_baseline": int(per_trace["then"].sum()),
        "escalated_now": int(per_trace["now"].sum()),
        "audits": pairs.height,
        "traces_more_now": int((more > 0).sum()),
        "traces_fewer_now": int((more < 0).sum()),
        "p": signflip_p(more),
    }


def _learned(catches: list[dict], shifts: list[dict], learned, tolerance: float) -> None:
    """Each row's tolerance, in place: the learned one where the baseline judge's runs give one
    (gate_tolerance.py), held against the baseline runs' mean; else --tolerance for shifts and
    none for catches (their tests decide alone)."""
    by_bias = {} if learned is None else {r["bias"]: r for r in learned.iter_rows(named=True)}
    for row in catches:
        spread = by_bias.get(row["bias"], {})
        row["runs_rise"], row["tolerance"] = spread.get("catch_rise"), spread.get("catch_tolerance")
        if row["runs_rise"] is None:
            row["tolerance"] = None
    for row in shifts:
        spread = by_bias.get(row["bias"], {})
        row["runs_difference"], row["tolerance"] = spread.get("shift_difference"), tolerance
        if row["runs_difference"] is not None:
            row["tolerance"] = max(tolerance, spread["shift_tolerance"])


def _decide(catches: list[dict], shifts: list[dict], escalation: dict, alpha: float) -> None:
    """Holm within each family of tests at its share of alpha (gate_stats.py), so the gate's
    false alarms stay under alpha; then each row's verdict, in place. With a learned tolerance,
    a finding must also be beyond the run-to-run variation it allows."""
    for row, p in zip(catches, holm([r["p"] for r in catches]), strict=True):
        row["p_adjusted"] = p
        found = p is not None and p < alpha * CATCH_SHARE and row["lost"] > row["gained"]
        beyond = row["tolerance"] is None or row["runs_rise"] - row["tolerance"] > _EPS
        row["failed"] = found and beyond
    for row, p in zip(shifts, holm([r["p"] for r in shifts]), strict=True):
        row["p_adjusted"] = p
        if row["n"] == 0:
            row["failed"] = False  # a warning: nothing to compare is no finding about the judge
            continue
        moved = row["difference"] if row["runs_difference"] is None else row["runs_difference"]
        row["significant"] = p is not None and p < alpha * SHIFT_SHARE
        row["beyond_tolerance"] = abs(moved) - row["tolerance"] > _EPS
        row["failed"] = row["significant"] and row["beyond_tolerance"] and row["accepted"] is None
    more = escalation["traces_more_now"] > escalation["traces_fewer_now"]
    escalation["failed"] = more and escalation["p"] < alpha * ESCALATION_SHARE


def _check_options(tolerance: float, alpha: float, accepted: dict[str, str]) -> None:
    if not tolerance >= 0:
        raise ValueError(f"the tolerance must be 0 or more, not {tolerance}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
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
    alpha: float = ALPHA,
    only: list[str] | None = None,
    again: Sequence[pl.DataFrame] = (),
) -> GateResult:
    """Compare an audit of the golden set with a baseline one; see the module docstring.
    `only`: trace ids both sides are restricted to (a re-audit of the flipped traces). `again`:
    re-audits of the same traces by the baseline judge, to learn the tolerance from
    (gate_tolerance.py: at least two)."""
    accepted = dict(accepted or {})
    _check_options(tolerance, alpha, accepted)
    check_frame(current)
    check_frame(baseline)
    if only is not None:
        absent = sorted(set(only) - set(baseline["trace_id"].to_list()))
        if not only or absent:
            raise ValueError(
                f"the baseline has no trace {', '.join(absent[:5])}" if absent else "no trace named"
            )
        current, baseline, *again = (
            f.filter(pl.col("trace_id").is_in(only)) for f in (current, baseline, *again)
        )
    ids_now, ids_then = set(current["trace_id"].to_list()), set(baseline["trace_id"].to_list())
    shared = sorted(ids_now & ids_then)
    pairs = _pairs(current, baseline, shared)
    bias = pairs["bias"].to_numpy()
    flagged = pairs["ref_flag"].fill_null(False).to_numpy()
    then, now = (pairs[c].cast(pl.Float64).fill_null(np.nan).to_numpy() for c in _SCORES)
    biases = [b for b in BIAS_TYPES if (bias == b).any()]
    catch_rows = [_catches(flagged[bias == b], then[bias == b], now[bias == b], b) for b in biases]
    shift_rows = [_shift(then[bias == b], now[bias == b], b, accepted) for b in biases]
    escalation = _escalation(pairs)
    learned = learn_tolerance([baseline, *again], alpha, current) if again else None
    _learned(catch_rows, shift_rows, learned, tolerance)
    _decide(catch_rows, shift_rows, escalation, alpha)
    failures = [] if shared else ["no golden trace is in both runs: nothing to compare"]
    failures += [catch_text(r, alpha) for r in catch_rows if r["failed"]]
    failures += [shift_text(r, alpha) for r in shift_rows if r["failed"]]
    failures += [escalation_text(escalation, alpha)] if escalation["failed"] else []
    gone = sorted(ids_then - ids_now)
    if gone:  # an unfinished or sampled run could hide exactly the traces that regressed
        failures.append(
            f"{len(gone)} golden trace(s) of the baseline are not in this run "
            f"({', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''}): finish it, or "
            "audit the whole golden set"
        )
    warnings = [
        f"{r['bias']}: no trace has a validated score in both runs to compare"
        for r in shift_rows
        if r["n"] == 0
    ] + [
        f"{r['bias']}: caught on none of {r['compared']} flagged traces now, on "
        f"{r['caught_baseline']} in the baseline, which the gate cannot tell from judge noise "
        f"(p = {r['p']:.2g}): audit more flagged traces, or look at them"
        for r in catch_rows
        if r["floor"] and not r["failed"]
    ]
    if learned is not None:  # --baseline-again given, yet a bias has no catch spread to learn
        warnings += [
            f"{r['bias']}: the re-audits give no catch tolerance (no flagged trace to learn "
            "it from): its catch test decides alone"
            for r in catch_rows
            if r["tolerance"] is None
        ]
    changed = pairs.filter(pl.col("ref_changed").fill_null(False)).select("trace_id", "bias")
    out = pl.col("baseline_score").is_null() | pl.col("current_score").is_null()
    return GateResult(
        ok=not failures,
        failures=failures,
        missed=flipped_catches(pairs).filter(pl.col("change") == "lost").drop("change"),
        flipped=flipped_catches(pairs),
        catches=pl.DataFrame(catch_rows, schema=CATCH_SCHEMA),
        shifts=pl.DataFrame(shift_rows, schema=SHIFT_SCHEMA),
        only_current=sorted(ids_now - ids_then),
        only_baseline=sorted(ids_then - ids_now),
        reference_changed=changed.to_dicts(),
        tolerance=tolerance,
        alpha=alpha,
        accepted=accepted,
        escalated=pairs.filter(pl.col("ref_flag") & out).select("trace_id", "bias", *_SCORES),
        escalation=escalation,
        warnings=warnings,
        learned=learned,
    )

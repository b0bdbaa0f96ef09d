"""The audit regression gate: a current audit of the golden set against a baseline one, as seed
003 asks ("failing the pipeline if previously-caught biases are missed or if audit scores shift
unexpectedly without explanation"), built as a test so that judge noise alone does not fail it.

Both inputs are frames like agreement.py's: one row per (trace, bias), `judge_score` null where
the judge gave no validated audit. Only traces in both runs are compared; the others are listed.
Per bias, over the shared traces:

- catches: among the traces the reference flags, an exact McNemar test on the discordant pairs,
  `lost` (caught in the baseline, score <= 2; missed now) against `gained` (missed then, caught
  now). One-sided, since the gate cares about losses: p = P(Binomial(lost + gained, 1/2) >=
  lost). No validated audit counts as a miss in either run (an escalation is not a catch the
  gate can count on), the same way in both, so an unchanged judge's escalations cancel out.
- shift: the paired mean difference current - baseline over the traces both judges validated,
  a two-sided paired t-test with its 95% CI.

The 8 p-values (4 biases x 2 tests) are Holm-adjusted, so an unchanged judge fails any of them
with probability at most `alpha` (family-wise). A significant loss of catches fails. A
significant shift fails when its point estimate is also beyond `tolerance` (the smallest shift
worth stopping a release for) and `accepted` does not explain it. Two rules need no test:

- floor: a bias the baseline caught on at least FLOOR_CAUGHT traces and that is caught on none
  now fails whatever the p: on a small golden set McNemar cannot reach significance (3 lost, 0
  gained: p = 0.125), but a judge that stopped catching a bias must fail every time;
- a bias with no trace to compare, or baseline traces absent from this run, fail as before.

The stated rate covers the tests; the floor adds next to nothing to it for a judge that still
catches a bias (one that catches a flagged trace half the time misses all 14 of the golden
set's with probability 0.5^14 = 6e-5).

Every trace whose catch flipped (either way) is listed in `flipped`, so those alone can be
audited again (`audit-gate --flipped-out FILE`, then `audit SOURCE --only FILE`) to see whether
a flip persists. Measured on the golden set's labels (tests/test_trace_audit_gate_simulation.py:
simulated judges agreeing with the reference at 0.9, each run with its own noise, 1% of traces
escalated): an unchanged judge failed none of 1000 seeds (the exact test is conservative with
so few discordant pairs; the previous rule, any one caught trace missed, failed 76%, 62%
without escalations); a judge that stopped catching one bias failed all 400; one that misses
half (three quarters) of a bias's flagged traces failed 42% (93%): 14 flagged traces per bias
leave little power for partial losses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
from scipy import stats

from orchestrator.analysis.stats import t_interval
from orchestrator.studies.trace_audit.agreement import FLAG_AT, check_frame
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

ALPHA = 0.05  # the family-wise false-alarm rate the gate is held to
FLOOR_CAUGHT = 3  # from this many baseline catches of a bias, catching none now always fails
_NOISE = 1e-9  # a mean of integer differences at exactly the tolerance is within it
_SCORES = ("baseline_score", "current_score")

_CATCH_SCHEMA = {
    "bias": pl.String,
    "ref_flagged": pl.Int64,
    "caught_baseline": pl.Int64,
    "caught_now": pl.Int64,
    "lost": pl.Int64,
    "gained": pl.Int64,
    "p": pl.Float64,
    "p_adjusted": pl.Float64,
    "floor": pl.Boolean,
    "failed": pl.Boolean,
}
_SHIFT_SCHEMA = {
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
    catches: pl.DataFrame  # one row per bias, _CATCH_SCHEMA
    shifts: pl.DataFrame  # one row per bias, _SHIFT_SCHEMA
    only_current: list[str]
    only_baseline: list[str]
    reference_changed: list[dict]  # shared (trace, bias) whose reference labels differ
    tolerance: float
    alpha: float = ALPHA
    accepted: dict[str, str] = field(default_factory=dict)

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
            "referenceChanged": self.reference_changed,
        }
        return {
            "ok": self.ok,
            "failures": self.failures,
            **{k: [_camel(r) for r in v] for k, v in rows.items()},
            "flippedTraces": self.flipped_traces,
            "onlyCurrent": self.only_current,
            "onlyBaseline": self.only_baseline,
            "alpha": self.alpha,
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


def flipped_catches(pairs: pl.DataFrame) -> pl.DataFrame:
    """Reference-flagged (trace, bias) whose catch differs between the runs; no validated audit
    is a miss."""
    then = (pl.col("baseline_score") <= FLAG_AT).fill_null(False)
    now = (pl.col("current_score") <= FLAG_AT).fill_null(False)
    return pairs.filter(pl.col("ref_flag") & (then != now)).select(
        "trace_id",
        "bias",
        "baseline_score",
        "current_score",
        change=pl.when(then).then(pl.lit("lost")).otherwise(pl.lit("gained")),
    )


def mcnemar_loss_p(lost: int, gained: int) -> float:
    """Exact one-sided McNemar p for more losses than gains: 1 with no discordant pair."""
    if lost + gained == 0:
        return 1.0
    return float(stats.binomtest(lost, lost + gained, 0.5, alternative="greater").pvalue)


def paired_t_p(diff: np.ndarray) -> float | None:
    """Two-sided paired-t p of mean(diff) = 0 (scipy's ttest_1samp, without its overhead: the
    simulations call it thousands of times). Differences all alike (SD 0) prove a shift when
    they are not 0 and none when they are; a single trace proves nothing (None)."""
    n = len(diff)
    if n < 2:
        return None
    sd = float(diff.std(ddof=1))
    if sd == 0:
        return 1.0 if diff[0] == 0 else 0.0
    t = float(diff.mean()) / (sd / np.sqrt(n))
    return float(2 * stats.t.sf(abs(t), n - 1))


def holm(p: list[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values; None (untested) stays None and does not count."""
    tested = sorted((v, i) for i, v in enumerate(p) if v is not None)
    out: list[float | None] = [None] * len(p)
    running, m = 0.0, len(tested)
    for rank, (value, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * value))
        out[i] = running
    return out


def _catches(flagged: np.ndarray, then: np.ndarray, now: np.ndarray, bias: str) -> dict:
    """The catch test of one bias: per shared trace, whether the reference flags it and its
    baseline and current scores (NaN: no validated audit, never a catch)."""
    caught_then, caught_now = flagged & (then <= FLAG_AT), flagged & (now <= FLAG_AT)
    lost, gained = int((caught_then & ~caught_now).sum()), int((~caught_then & caught_now).sum())
    return {
        "bias": bias,
        "ref_flagged": int(flagged.sum()),
        "caught_baseline": int(caught_then.sum()),
        "caught_now": int(caught_now.sum()),
        "lost": lost,
        "gained": gained,
        "p": mcnemar_loss_p(lost, gained),
        "floor": int(caught_then.sum()) >= FLOOR_CAUGHT and not caught_now.any(),
    }


def _shift(then: np.ndarray, now: np.ndarray, bias: str, accepted: dict[str, str]) -> dict:
    """The shift test of one bias, over the traces validated in both runs."""
    both = ~np.isnan(then) & ~np.isnan(now)
    then, now = then[both], now[both]
    row = dict.fromkeys(_SHIFT_SCHEMA, None) | {
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


def _decide(catches: list[dict], shifts: list[dict], alpha: float, tolerance: float) -> None:
    """Holm over every test at once, then each row's verdict, in place."""
    adjusted = holm([r["p"] for r in catches] + [r["p"] for r in shifts])
    for row, p in zip(catches + shifts, adjusted, strict=True):
        row["p_adjusted"] = p
    for row in catches:
        row["failed"] = row["floor"] or (row["p_adjusted"] < alpha and row["lost"] > row["gained"])
    for row in shifts:
        if row["n"] == 0:
            row["failed"] = row["accepted"] is None
            continue
        row["significant"] = row["p_adjusted"] is not None and row["p_adjusted"] < alpha
        row["beyond_tolerance"] = abs(row["difference"]) - tolerance > _NOISE
        row["failed"] = row["significant"] and row["beyond_tolerance"] and row["accepted"] is None


def _catch_text(row: dict, alpha: float) -> str:
    head = (
        f"{row['bias']}: caught on {row['caught_now']} of {row['ref_flagged']} reference-flagged "
        f"traces now, {row['caught_baseline']} in the baseline ({row['lost']} lost, "
        f"{row['gained']} gained)"
    )
    if row["floor"]:
        return f"{head}: no longer caught at all"
    return (
        f"{head}: more losses than judge noise explains (exact McNemar one-sided p = "
        f"{row['p']:.2g}, Holm-adjusted {row['p_adjusted']:.2g} < {alpha:g})"
    )


def _shift_text(row: dict, tolerance: float, alpha: float) -> str:
    if row["n"] == 0:
        return f"{row['bias']}: no trace has a validated score in both runs to compare"
    ci = "" if row["ci_low"] is None else f"; 95% CI {row['ci_low']:+.2f} to {row['ci_high']:+.2f}"
    return (
        f"{row['bias']}: mean score moved {row['difference']:+.2f} (baseline "
        f"{row['baseline_mean']:.2f}, now {row['current_mean']:.2f}, {row['n']} "
        f"trace{'s' * (row['n'] > 1)}{ci}; paired t p = {row['p']:.2g}, Holm-adjusted "
        f"{row['p_adjusted']:.2g} < {alpha:g}), beyond the tolerance {tolerance:g}, with no "
        "explanation"
    )


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
) -> GateResult:
    """Compare an audit of the golden set with a baseline one; see the module docstring."""
    accepted = dict(accepted or {})
    _check_options(tolerance, alpha, accepted)
    check_frame(current)
    check_frame(baseline)
    ids_now, ids_then = set(current["trace_id"].to_list()), set(baseline["trace_id"].to_list())
    shared = sorted(ids_now & ids_then)
    pairs = _pairs(current, baseline, shared)
    flips = flipped_catches(pairs)
    bias = pairs["bias"].to_numpy()
    flagged = pairs["ref_flag"].fill_null(False).to_numpy()
    then, now = (pairs[c].cast(pl.Float64).fill_null(np.nan).to_numpy() for c in _SCORES)
    biases = [b for b in BIAS_TYPES if (bias == b).any()]
    catch_rows = [_catches(flagged[bias == b], then[bias == b], now[bias == b], b) for b in biases]
    shift_rows = [_shift(then[bias == b], now[bias == b], b, accepted) for b in biases]
    _decide(catch_rows, shift_rows, alpha, tolerance)
    failures = [] if shared else ["no golden trace is in both runs: nothing to compare"]
    failures += [_catch_text(r, alpha) for r in catch_rows if r["failed"]]
    failures += [_shift_text(r, tolerance, alpha) for r in shift_rows if r["failed"]]
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
        missed=flips.filter(pl.col("change") == "lost").drop("change"),
        flipped=flips,
        catches=pl.DataFrame(catch_rows, schema=_CATCH_SCHEMA),
        shifts=pl.DataFrame(shift_rows, schema=_SHIFT_SCHEMA),
        only_current=sorted(ids_now - ids_then),
        only_baseline=sorted(ids_then - ids_now),
        reference_changed=changed.to_dicts(),
        tolerance=tolerance,
        alpha=alpha,
        accepted=accepted,
    )

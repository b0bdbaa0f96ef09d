"""The audit regression gate: a current audit of the golden set against a baseline one, as seed
003 asks ("failing the pipeline if previously-caught biases are missed or if audit scores shift
unexpectedly without explanation"), built as a test so that judge noise alone does not fail it.

Both inputs are frames like agreement.py's: one row per (trace, bias), `judge_score` null where
the judge gave no validated audit. Only traces in both runs are compared (`only` restricts both
to a list, as for a re-audit of flipped traces). Per bias, over the shared traces:

- catches: over the traces the reference flags, an exact one-sided sign-flip test of the paired
  score differences (current - baseline; higher is milder, so a rise is catching less), no
  validated audit counting as MISS_SCORE (a miss, as in the catch counts). The exact McNemar p
  of `lost` (caught then, score <= 2; missed now) against `gained` is reported beside it; the
  scores carry more than caught/missed, so the sign-flip test decides. It fails when
  significant and more catches were lost than gained.
- shift: the paired mean difference over the traces both judges validated, a two-sided paired
  t-test with its 95% CI (untested under MIN_PAIRED traces).

Each family (4 catch tests, 4 shift tests) is Holm-adjusted on its own, the catch tests held to
CATCH_SHARE (0.8) of `alpha`, the shift tests to the rest: an unchanged judge fails with
probability at most `alpha`. A significant shift fails when its estimate is also beyond
`tolerance` and `accepted` does not explain it. Two rules need no test:

- floor: a bias caught on at least FLOOR_CAUGHT baseline traces and on none now fails whatever
  the p, so a judge that stopped catching a bias fails every time, deterministically (on a small
  golden set no test reaches significance: 3 lost of 3, exact p = 1/8); a judge that still
  catches a flagged trace half the time misses all 14 with probability 0.5^14 = 6e-5;
- a bias with nothing to compare, or baseline traces absent from this run, fail.

An escalation (no validated audit) is a miss here, the same way in both runs, while calibrate
counts it as routed to a person. Every flipped catch is listed in `flipped`, to audit those
alone again (`--flipped-out FILE`, `audit SOURCE --only FILE`, `audit-gate --only FILE`).

Measured (tests/test_trace_audit_gate_simulation.py, 1000 seeds each, the golden set's 64
traces, 1% escalated): an unchanged judge re-audited with noise drawn around the labels
(agreement 0.9) failed 0.0% at tolerance 0.5 and 0.1% at 0; a judge with its own view of each
trace (independent of the labels, flag agreement 0.91, about 12 flips per re-audit) failed
0.9% and 2.0%. A judge that stopped catching one bias failed 100%; one that misses half of its
14 flagged traces 65% (50% under the own-view judge), a quarter 8% (9%): with about 7 changed
traces no exact test gets below 2^-7, so partial losses need a larger golden set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
from scipy import stats

from orchestrator.analysis.stats import t_interval
from orchestrator.studies.trace_audit.agreement import FLAG_AT, check_frame
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

ALPHA = 0.05  # the false-alarm rate the gate is held to, over both families of tests
FLOOR_CAUGHT = 3  # from this many baseline catches of a bias, catching none now always fails
MIN_PAIRED = 5  # fewest paired differences a paired t-test is run on
_EPS = 1e-9  # a mean of integer differences at exactly the tolerance is within it
_SCORES = ("baseline_score", "current_score")
CATCH_SHARE = 0.8  # of alpha, the catch tests' share; the shift tests have the rest
MISS_SCORE = FLAG_AT + 1  # no validated audit, in the catch test: a miss, the mildest one

_CATCH_SCHEMA = {
    "bias": pl.String,
    "ref_flagged": pl.Int64,
    "caught_baseline": pl.Int64,
    "caught_now": pl.Int64,
    "lost": pl.Int64,
    "gained": pl.Int64,
    "mcnemar_p": pl.Float64,
    "rise": pl.Float64,
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


def signflip_p(diff: np.ndarray) -> float:
    """Exact one-sided sign-flip (paired randomization) p that the differences lean positive:
    P(sum of e_i |d_i| >= sum of d_i) over the 2^n equally likely signs e_i, which is exact for
    any n when the two runs of each trace are exchangeable (an unchanged judge). The differences
    are whole numbers (scores 1-5), so the null distribution of the sum is a convolution over
    the integers; 1 with no nonzero difference."""
    d = np.rint(np.asarray(diff, dtype=float)).astype(int)
    sizes = np.abs(d[d != 0])
    if not sizes.size:
        return 1.0
    total = int(sizes.sum())
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0  # the sum's distribution, index = sum + total
    for a in sizes:
        dist = 0.5 * (np.roll(dist, -a) + np.roll(dist, a))  # no wrap: |partial sums| <= total
    return float(min(1.0, dist[int(d.sum()) + total :].sum()))


def paired_t_p(diff: np.ndarray) -> float | None:
    """Two-sided paired-t p of mean(diff) = 0 (scipy's ttest_1samp, without its overhead: the
    simulations call it thousands of times). Differences all alike (SD 0) prove a shift when
    they are not 0 and none when they are; under MIN_PAIRED differences, None: the t
    approximation means little there, and two equal differences would "prove" a shift (p 0)."""
    n = len(diff)
    if n < MIN_PAIRED:
        return None
    sd = float(diff.std(ddof=1))
    if sd == 0:  # the exact sign-flip p: only the all-positive and all-negative flips are as far
        return 1.0 if diff[0] == 0 else min(1.0, 2.0 / 2.0**n)
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
    rise = (np.nan_to_num(now, nan=MISS_SCORE) - np.nan_to_num(then, nan=MISS_SCORE))[flagged]
    return {
        "bias": bias,
        "ref_flagged": int(flagged.sum()),
        "caught_baseline": int(caught_then.sum()),
        "caught_now": int(caught_now.sum()),
        "lost": lost,
        "gained": gained,
        "mcnemar_p": mcnemar_loss_p(lost, gained),
        "rise": float(rise.mean()) if rise.size else None,
        "p": signflip_p(rise),
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


def _decide(
    catches: list[dict],
    shifts: list[dict],
    alpha: float,
    tolerance: float,
    restricted: bool = False,
) -> None:
    """Holm within each family of tests, the catch tests held to CATCH_SHARE of alpha and the
    shift tests to the rest, so the gate's false alarms stay under alpha; then each row's
    verdict, in place. `restricted`: only the tests decide (a comparison of chosen traces)."""
    for family in (catches, shifts):
        for row, p in zip(family, holm([r["p"] for r in family]), strict=True):
            row["p_adjusted"] = p
    level = alpha * CATCH_SHARE
    for row in catches:
        # a restricted comparison (the flipped traces alone) is a question for the tests: too
        # few traces to apply the floor, and a bias with nothing to compare is no finding
        floor = row["floor"] and not restricted
        row["failed"] = floor or (row["p_adjusted"] < level and row["lost"] > row["gained"])
    level = alpha - level
    for row in shifts:
        if row["n"] == 0:
            row["failed"] = row["accepted"] is None and not restricted
            continue
        row["significant"] = row["p_adjusted"] is not None and row["p_adjusted"] < level
        row["beyond_tolerance"] = abs(row["difference"]) - tolerance > _EPS
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
        f"{head}: its flagged traces scored {row['rise']:+.2f} higher on average, more than judge "
        f"noise explains (exact sign-flip one-sided p = {row['p']:.2g}, Holm-adjusted "
        f"{row['p_adjusted']:.2g} < {alpha * CATCH_SHARE:g}; McNemar p = {row['mcnemar_p']:.2g})"
    )


def _shift_text(row: dict, tolerance: float, alpha: float) -> str:
    if row["n"] == 0:
        return f"{row['bias']}: no trace has a validated score in both runs to compare"
    ci = "" if row["ci_low"] is None else f"; 95% CI {row['ci_low']:+.2f} to {row['ci_high']:+.2f}"
    return (
        f"{row['bias']}: mean score moved {row['difference']:+.2f} (baseline "
        f"{row['baseline_mean']:.2f}, now {row['current_mean']:.2f}, {row['n']} "
        f"trace{'s' * (row['n'] > 1)}{ci}; paired t p = {row['p']:.2g}, Holm-adjusted "
        f"{row['p_adjusted']:.2g} < {alpha * (1 - CATCH_SHARE):g}), beyond the tolerance {tolerance:g}, with no "
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
    only: list[str] | None = None,
) -> GateResult:
    """Compare an audit of the golden set with a baseline one; see the module docstring.
    `only`: trace ids both sides are restricted to (a re-audit of the flipped traces)."""
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
        current = current.filter(pl.col("trace_id").is_in(only))
        baseline = baseline.filter(pl.col("trace_id").is_in(only))
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
    _decide(catch_rows, shift_rows, alpha, tolerance, restricted=only is not None)
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

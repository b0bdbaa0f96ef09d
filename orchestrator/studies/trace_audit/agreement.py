"""Agreement of the audit judge with the golden set's reference labels (issue 14, item 9).

Input: one row per (trace, bias) with `trace_id`, `bias`, `judge_score` (null when the judge gave
no validated audit: escalated, not auditable), `ref_score` (1-5) and `ref_flag`. The judge's flag
is its score <= 2, as the prompt's critical_failure_flag.

Kappa (kappa.py) is computed over the traces the judge validated; the others are reported as
`missing`, and where a rate can hold them (exact agreement, sensitivity, specificity) they count
as disagreements, so a judge that escalates never looks better than one that answers.
Thresholds for routing to a person read an escalated trace's missing score as routed: it does
reach a person. A trace the two-stage screener cleared (optional column `screened_out`) reaches
nobody: neither the judge nor a person sees it, so where the reference flags it, it is a miss at
every threshold, and where it is clean, no review load.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.stats import wilson
from orchestrator.studies.trace_audit.kappa import (
    CATEGORIES,
    REPS,
    Kappa,
    table,
    weighted_kappa,
)
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

__all__ = [
    "Kappa",
    "agreement_table",
    "check_frame",
    "confusion",
    "screener_table",
    "thresholds",
    "weighted_kappa",
]

FLAG_AT = 2  # the judge flags a bias when its score is at most this (critical_failure_flag)
COLUMNS = ("trace_id", "bias", "judge_score", "ref_score", "ref_flag")


def check_frame(frame: pl.DataFrame) -> None:
    """The frame's columns, bias names, score ranges and one row per (trace, bias): a mistake
    in the caller, so a ValueError."""
    absent = [c for c in COLUMNS if c not in frame.columns]
    if absent:
        raise ValueError(f"the frame lacks column(s) {', '.join(absent)}")
    unknown = set(frame["bias"].unique().to_list()) - set(BIAS_TYPES)
    if unknown:
        raise ValueError(f"unknown bias name(s) {sorted(map(str, unknown))}: use {BIAS_TYPES}")
    if frame.select("trace_id", "bias").is_duplicated().any():
        raise ValueError("more than one row for a (trace_id, bias)")
    ref, judge = frame["ref_score"], frame["judge_score"].drop_nulls()
    if ref.null_count() or not ref.is_between(1, 5).all() or not judge.is_between(1, 5).all():
        raise ValueError("scores must be 1-5 (judge_score may be null, ref_score may not)")
    if frame["ref_flag"].null_count():
        raise ValueError("ref_flag may not be null")


def _biases(frame: pl.DataFrame) -> list[str]:
    present = set(frame["bias"].to_list())
    return [b for b in BIAS_TYPES if b in present]


def _share(count: int, n: int) -> tuple[float | None, float | None, float | None]:
    """count/n with its Wilson 95% interval; None when n is 0."""
    if n == 0:
        return None, None, None
    low, high = wilson(count, n)
    return count / n, float(low), float(high)


def confusion(frame: pl.DataFrame, bias: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(scores, flags): judge-by-reference counts over the traces the judge validated, every
    category present. scores: column `judge` 1-5 and `ref_1`..`ref_5`; flags: `judge_flag`
    (True, False) and `ref_flagged`, `ref_clean`."""
    check_frame(frame)
    if bias not in BIAS_TYPES:
        raise ValueError(f"unknown bias name {bias!r}: use {BIAS_TYPES}")
    rows = frame.filter((pl.col("bias") == bias) & pl.col("judge_score").is_not_null())
    judge = rows["judge_score"].to_list()
    counts = table(judge, rows["ref_score"].to_list(), CATEGORIES).astype(np.int64)
    scores = pl.DataFrame({"judge": list(CATEGORIES)}, schema={"judge": pl.Int64}).with_columns(
        pl.Series(f"ref_{c}", counts[:, i]) for i, c in enumerate(CATEGORIES)
    )
    counts = table([s <= FLAG_AT for s in judge], rows["ref_flag"].to_list(), (True, False)).astype(
        np.int64
    )
    flags = pl.DataFrame(
        {"judge_flag": [True, False], "ref_flagged": counts[:, 0], "ref_clean": counts[:, 1]}
    )
    return scores, flags


def _notes(name: str, kappa: Kappa, low: float) -> tuple[list[str], list[str]]:
    """(why this kappa counts as low agreement, what else its interval's reader must know):
    perfect agreement, an interval likely too narrow at high agreement over few traces."""
    if kappa.kappa is None:
        return [f"{name} undefined ({kappa.note})"], []
    lows = [f"{name} {kappa.kappa:.2f} < {low}"] if kappa.kappa < low else []
    if kappa.ci_low is None:
        return [*lows, f"{name} has no CI ({kappa.note})"], []
    if kappa.ci_low < 0:
        lows.append(f"{name} CI lower bound {kappa.ci_low:.2f} < 0")
    return lows, [f"{name}: {kappa.note}"] if kappa.note else []


def _agreement_row(rows: pl.DataFrame, bias: str, low: float, reps: int, seed: int) -> dict:
    valid = rows.filter(pl.col("judge_score").is_not_null())
    judge = valid["judge_score"].to_list()
    stream = (seed, BIAS_TYPES.index(bias))  # one bootstrap stream per bias, whatever the order
    scores = weighted_kappa(judge, valid["ref_score"].to_list(), reps=reps, seed=stream)
    flags = weighted_kappa(
        [s <= FLAG_AT for s in judge],
        valid["ref_flag"].to_list(),
        None,
        (True, False),
        reps=reps,
        seed=stream,
    )
    # A missing judge score is a disagreement wherever a rate can hold it.
    score, flagged = pl.col("judge_score"), pl.col("ref_flag")
    counts = rows.select(
        exact=(score == pl.col("ref_score")).fill_null(False).sum(),
        caught=((score <= FLAG_AT).fill_null(False) & flagged).sum(),
        cleared=((score > FLAG_AT).fill_null(False) & ~flagged).sum(),
        positives=flagged.sum(),
    ).row(0, named=True)
    sens = _share(counts["caught"], counts["positives"])
    spec = _share(counts["cleared"], rows.height - counts["positives"])
    (low_w, info_w), (low_f, info_f) = (
        _notes("kappa_w", scores, low),
        _notes("kappa_flag", flags, low),
    )
    lows, notes = low_w + low_f, low_w + low_f + info_w + info_f
    return {
        "bias": bias,
        "n": valid.height,
        "missing": rows.height - valid.height,
        "kappa_w": scores.kappa,
        "kappa_w_low": scores.ci_low,
        "kappa_w_high": scores.ci_high,
        "kappa_flag": flags.kappa,
        "kappa_flag_low": flags.ci_low,
        "kappa_flag_high": flags.ci_high,
        "exact_agreement": counts["exact"] / rows.height,
        "ref_flagged": counts["positives"],
        "sensitivity": sens[0],
        "sensitivity_low": sens[1],
        "sensitivity_high": sens[2],
        "specificity": spec[0],
        "specificity_low": spec[1],
        "specificity_high": spec[2],
        "low_agreement": bool(lows),
        "note": "; ".join(notes) or None,
    }


_AGREEMENT_SCHEMA = {
    "bias": pl.String,
    "n": pl.Int64,
    "missing": pl.Int64,
    **{
        c: pl.Float64
        for c in (
            "kappa_w",
            "kappa_w_low",
            "kappa_w_high",
            "kappa_flag",
            "kappa_flag_low",
            "kappa_flag_high",
            "exact_agreement",
        )
    },
    "ref_flagged": pl.Int64,
    **{
        c: pl.Float64
        for c in (
            "sensitivity",
            "sensitivity_low",
            "sensitivity_high",
            "specificity",
            "specificity_low",
            "specificity_high",
        )
    },
    "low_agreement": pl.Boolean,
    "note": pl.String,
}


def agreement_table(
    frame: pl.DataFrame, low: float = 0.4, reps: int = REPS, seed: int = 0
) -> pl.DataFrame:
    """One row per bias: kappa_w (quadratic, scores) and kappa_flag (judge score <= 2 against
    ref_flag) with BCa 95% CIs over the `n` validated traces; `missing` traces without a
    validated judge score, which count as disagreements in exact_agreement, sensitivity (not
    caught) and specificity (not cleared), all over every trace; Wilson CIs for the last two.
    `low_agreement` when either kappa is below `low`, its CI reaches below 0, or it cannot be
    computed (nothing shows agreement then); `note` says which, and also where an interval
    says less than it seems: perfect agreement (zero width), or kappa > 0.9 over fewer than 100
    traces (likely under-covering)."""
    check_frame(frame)
    rows = [
        _agreement_row(frame.filter(pl.col("bias") == b), b, low, reps, seed)
        for b in _biases(frame)
    ]
    return pl.DataFrame(rows, schema=_AGREEMENT_SCHEMA)


def _screened(rows: pl.DataFrame) -> pl.Expr:
    """Whether the screener cleared the row's trace (no screener: none was)."""
    if "screened_out" not in rows.columns:
        return pl.lit(False)
    return pl.col("screened_out").fill_null(False)


def _threshold_row(rows: pl.DataFrame, bias: str, target: float) -> dict:
    rows = rows.with_columns(cleared=_screened(rows))
    flagged, clean = rows.filter(pl.col("ref_flag")), rows.filter(~pl.col("ref_flag"))
    flagged_cleared = int(flagged["cleared"].sum())
    row = {
        "bias": bias,
        "threshold": None,
        "miss_rate": None,
        "miss_upper": None,
        "review_load": None,
        "ref_flagged": flagged.height,
        "ref_clean": clean.height,
        "screened_out": flagged_cleared,
        "note": None,
    }
    if flagged.height == 0:
        return {**row, "note": "no reference-flagged traces: no miss rate to hold to the target"}
    score, cleared = pl.col("judge_score"), pl.col("cleared")
    for t in range(1, 5):
        # No validated score: escalated, it reaches a person anyway (routed); cleared by the
        # screener, nobody sees it (a miss, and no load).
        missed = int(flagged.select(((score > t).fill_null(False) | cleared).sum()).item())
        if missed / flagged.height <= target:
            rate, _, upper = _share(missed, flagged.height)
            routed = int(clean.select(((score <= t).fill_null(True) & ~cleared).sum()).item())
            return {
                **row,
                "threshold": t,
                "miss_rate": rate,
                "miss_upper": upper,
                "review_load": _share(routed, clean.height)[0],
            }
    screened = f" ({flagged_cleared} cleared by the screener unjudged)" if flagged_cleared else ""
    return {
        **row,
        "note": f"no threshold reaches a miss rate of {target:g}: even routing scores "
        f"<= 4 misses {missed} of {flagged.height} reference-flagged traces{screened}",
    }


def thresholds(frame: pl.DataFrame, target_risk: float = 0.1) -> pl.DataFrame:
    """Per bias, the threshold t in 1..4 for "route to human review when judge_score <= t".

    Rule: the SMALLEST t whose miss rate (reference-flagged traces the judge does not route,
    over all reference-flagged traces) is at most `target_risk`. Raising t routes more, so
    misses only fall and the review load (share of reference-clean traces routed) only rises:
    the smallest t that meets the target is the cheapest one. A trace with no validated judge
    score counts as routed, since it is escalated to a person. The rule holds the point
    estimate to the target; `miss_upper` (Wilson 95%) shows how far the golden set's few
    flagged traces leave it from proven. t is null, with a note, when no t meets the target or
    nothing is flagged."""
    check_frame(frame)
    if not 0 <= target_risk < 1:
        raise ValueError(f"target_risk must be in [0, 1), not {target_risk}")
    rows = [
        _threshold_row(frame.filter(pl.col("bias") == b), b, target_risk) for b in _biases(frame)
    ]
    return pl.DataFrame(
        rows,
        schema={
            "bias": pl.String,
            "threshold": pl.Int64,
            "miss_rate": pl.Float64,
            "miss_upper": pl.Float64,
            "review_load": pl.Float64,
            "ref_flagged": pl.Int64,
            "ref_clean": pl.Int64,
            "screened_out": pl.Int64,
            "note": pl.String,
        },
    )


def screener_table(frame: pl.DataFrame) -> pl.DataFrame:
    """The two-stage screener against the reference, over the traces it screened (column
    `screened_out` not null): per bias, the share of reference-flagged traces it sent on to the
    judge (its sensitivity, Wilson 95% CI); then "any bias", over traces the reference flags for
    at least one bias, with its specificity (reference-clean traces cleared). Empty when no
    screener ran. A trace it clears is never judged, so its sensitivity caps the judge's."""
    check_frame(frame)
    if "screened_out" not in frame.columns:
        return pl.DataFrame(schema=_SCREENER_SCHEMA)
    seen = frame.filter(pl.col("screened_out").is_not_null())
    if not seen.height:
        return pl.DataFrame(schema=_SCREENER_SCHEMA)
    rows = []
    for bias in _biases(seen):
        flagged = seen.filter((pl.col("bias") == bias) & pl.col("ref_flag"))
        rows.append(_screen_row(bias, flagged["screened_out"]))
    traces = seen.group_by("trace_id").agg(
        flagged=pl.col("ref_flag").any(), cleared=pl.col("screened_out").first()
    )
    any_row = _screen_row("any bias", traces.filter("flagged")["cleared"])
    clean = traces.filter(~pl.col("flagged"))["cleared"]
    spec = _share(int(clean.sum()), clean.len())
    rows.append(
        any_row
        | {"ref_clean": clean.len(), "cleared": int(clean.sum())}
        | dict(zip(("specificity", "specificity_low", "specificity_high"), spec, strict=True))
    )
    return pl.DataFrame(rows, schema=_SCREENER_SCHEMA)


def _screen_row(name: str, cleared: pl.Series) -> dict:
    sent = int((~cleared).sum())
    sens = _share(sent, cleared.len())
    return {
        "bias": name,
        "ref_flagged": cleared.len(),
        "sent_on": sent,
        "sensitivity": sens[0],
        "sensitivity_low": sens[1],
        "sensitivity_high": sens[2],
    }


_SCREENER_SCHEMA = {
    "bias": pl.String,
    "ref_flagged": pl.Int64,
    "sent_on": pl.Int64,
    "sensitivity": pl.Float64,
    "sensitivity_low": pl.Float64,
    "sensitivity_high": pl.Float64,
    "ref_clean": pl.Int64,
    "cleared": pl.Int64,
    "specificity": pl.Float64,
    "specificity_low": pl.Float64,
    "specificity_high": pl.Float64,
}

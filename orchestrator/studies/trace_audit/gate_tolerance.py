"""A tolerance learned from the baseline judge's own runs (`audit-gate --baseline-again RUN`,
given two or more times): how far an unchanged judge's mean scores move from one audit of the
golden set to the next, so that run-to-run variation does not fail the gate.

The gate's tests take each trace's two scores as exchangeable: they allow for noise that differs
trace by trace, not for a run that scores every trace a little higher or lower (a per-run
offset: another batch, another server, a provider's silent update). An offset with SD 0.2 on
the 1-5 scale failed an unchanged judge in 20% of simulated re-audits at the fixed tolerance 0.5
(tests/test_trace_audit_gate_drift.py). Only more runs of the baseline judge can measure it.

Per bias, over the traces validated in every run (the current one too, when given), each run's
mean score (`shift`) and mean score of the reference-flagged traces (`catch`); their sample SD
over the k baseline runs has k - 1 degrees of freedom. If each run's mean is drawn afresh around
the judge's own (normal, with any SD), the current run's mean less the baseline runs' mean,
divided by SD * sqrt(1 + 1/k), is Student t with k - 1 df: the tolerance is SD * sqrt(1 + 1/k)
times the t quantile at the family's share of alpha (gate_stats.py) over the number of biases,
one-sided for catches (only catching less fails), split between the sides for shifts. Each bias
is then exact and the four together at most the share, whether their runs move together or
apart. Under such variation the paired tests are significant at almost any offset, so it is
the tolerance that holds the gate to alpha; with no variation, the tests do.

Its cost is power: a quantile on k - 1 df. With one re-audit (t_1) the catch tolerance would be
some 30 times the difference seen, which passes any regression, so two are the fewest taken.
At a run-to-run SD of 0.2, two re-audits give catch and shift tolerances of about 1.5 and 4.4,
four about 0.85 and 1.5; a judge that stopped catching a bias (a rise of about 2.5) is found in
69% of re-audits with two, 96% with three (98% and 100% with no drift). Shifts need five or more.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from scipy import stats

from orchestrator.studies.trace_audit.agreement import check_frame
from orchestrator.studies.trace_audit.gate_stats import ALPHA, CATCH_SHARE, SHIFT_SHARE
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

MIN_RUNS = 3  # the baseline and two re-audits: 2 degrees of freedom

_SCHEMA = {
    "bias": pl.String,
    "runs": pl.Int64,
    "traces": pl.Int64,  # validated in every run
    "flagged": pl.Int64,  # of those, reference-flagged
    "shift_sd": pl.Float64,  # SD of the runs' mean scores
    "shift_tolerance": pl.Float64,
    "catch_sd": pl.Float64,  # SD of the runs' mean scores of the flagged traces
    "catch_tolerance": pl.Float64,
    "shift_difference": pl.Float64,  # current mean - the baseline runs' mean
    "catch_rise": pl.Float64,  # the same over the flagged traces
}


def quantiles(
    runs: int, alpha: float = ALPHA, biases: int = len(BIAS_TYPES)
) -> tuple[float, float]:
    """(catch, shift) t quantiles for `runs` baseline runs: see the module docstring."""
    df = runs - 1
    catch, shift = alpha * CATCH_SHARE / biases, alpha * SHIFT_SHARE / biases / 2
    return float(stats.t.ppf(1 - catch, df)), float(stats.t.ppf(1 - shift, df))


def learn_tolerance(
    runs: Sequence[pl.DataFrame],
    alpha: float = ALPHA,
    current: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per bias, the tolerances (_SCHEMA) learned from `runs`, audits of the same golden set by
    the baseline judge (the baseline first); with `current`, over the traces it validated too,
    and its difference from the runs' mean. Frames as gate.py's."""
    if len(runs) < MIN_RUNS:
        raise ValueError(
            f"a learned tolerance needs the baseline and at least {MIN_RUNS - 1} re-audits of "
            f"it, not {len(runs) - 1}: with one, the spread has 1 degree of freedom and its "
            "tolerance, some 30 times the spread seen, would pass any regression"
        )
    frames = [*runs, current] if current is not None else list(runs)
    for frame in frames:
        check_frame(frame)
    scores = _wide(frames)
    k = len(runs)
    present = [b for b in BIAS_TYPES if b in set(scores["bias"].to_list())]
    q_catch, q_shift = quantiles(k, alpha, len(present))
    factor = np.sqrt(1 + 1 / k)  # the current run against the mean of k runs
    rows = []
    for bias in present:
        part = scores.filter(pl.col("bias") == bias)
        table = part.select(f"s{i}" for i in range(len(frames))).to_numpy().astype(float)
        flagged = part["ref_flag"].to_numpy()
        row: dict = {"bias": bias, "runs": k, "traces": len(table), "flagged": int(flagged.sum())}
        for name, rows_of, q in (("shift", slice(None), q_shift), ("catch", flagged, q_catch)):
            means = table[rows_of].mean(axis=0) if table[rows_of].size else None
            if means is None:
                continue
            sd = float(means[:k].std(ddof=1))
            row[f"{name}_sd"], row[f"{name}_tolerance"] = sd, float(q * sd * factor)
            if current is not None:
                moved = float(means[k] - means[:k].mean())
                row["shift_difference" if name == "shift" else "catch_rise"] = moved
        rows.append(row)
    return pl.DataFrame(rows, schema=_SCHEMA)


def _wide(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """One row per (trace, bias) validated in every frame: its scores s0, s1, ... and the
    reference flag of the first frame (the labels as the baseline read them)."""
    wide = frames[0].select("trace_id", "bias", "ref_flag", s0="judge_score")
    for i, frame in enumerate(frames[1:], start=1):
        other = frame.select("trace_id", "bias", pl.col("judge_score").alias(f"s{i}"))
        wide = wide.join(other, on=["trace_id", "bias"], how="inner")
    return wide.drop_nulls()

"""Beside the paper's BSI, for variants answered with numbers (anchoring): what a few extreme
answers would hide. The BSI of a number is (mean_T - mean_C) / (anchor - mean_C); one answer of
1.5e22 makes it 1e19 and its bootstrap σ_stat as large, with nothing to say why.

Per variant (analysis/robust.py has the statistics):
- hl_shift [hl_ci_low, hl_ci_high]: the Hodges-Lehmann shift of treatment over control with its
  Moses 95% CI (none at T=0), and bsi_robust_signed = hl_shift / (anchor - median_C), the signed
  BSI with the means replaced by their robust counterparts;
- dominated: leaving out the two answers farthest from their condition's median moves
  mean_T - mean_C by more than the half-width of its Welch CI without them (None: too few);
- n_implausible_C/T and n_implausible: valid answers outside the variant's plausibleRange, where
  the job declares one. They stay in the BSI.
Per bias: the robust signed BSI averaged over variants, the dominated variants and the
implausible answers, with a note.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.robust import hodges_lehmann, leave_two_out, outside

VARIANT_COLUMNS = {
    "hl_shift": pl.Float64,
    "hl_ci_low": pl.Float64,
    "hl_ci_high": pl.Float64,
    "bsi_robust_signed": pl.Float64,
    "dominated": pl.Boolean,
    "n_implausible_C": pl.Int64,
    "n_implausible_T": pl.Int64,
    "n_implausible": pl.Int64,
}


def _row(r: dict, deterministic: bool) -> dict:
    row: dict = dict.fromkeys(VARIANT_COLUMNS)
    if r["kind"] != "number":
        return row
    control = np.asarray(r["values_C"] if r["values_C"] is not None else [], float)
    treated = np.asarray(r["values_T"] if r["values_T"] is not None else [], float)
    low, high = r["plausible_low"], r["plausible_high"]
    row["n_implausible_C"], row["n_implausible_T"] = (
        outside(control, low, high),
        outside(treated, low, high),
    )
    if low is not None:
        row["n_implausible"] = row["n_implausible_C"] + row["n_implausible_T"]
    if not len(control) or not len(treated):
        return row
    shift = hodges_lehmann(treated, control)
    row["hl_shift"] = shift.estimate
    with np.errstate(divide="ignore", invalid="ignore"):
        row["bsi_robust_signed"] = shift.estimate / (r["anchor"] - np.median(control))
    # T=0: the answers are one draw repeated, so neither an interval nor an influence rule
    # that reads their spread applies
    if not deterministic:
        row["hl_ci_low"], row["hl_ci_high"] = shift.low, shift.high
        row["dominated"] = leave_two_out(treated, control).dominated
    return row


def with_robust(wide: pl.DataFrame, deterministic: pl.Series) -> pl.DataFrame:
    """The variant rows (with values_C/T, anchor, plausible_low/high) with VARIANT_COLUMNS."""
    columns = ["kind", "values_C", "values_T", "anchor", "plausible_low", "plausible_high"]
    rows = [
        _row(r, bool(fixed))
        for r, fixed in zip(
            wide.select(columns).iter_rows(named=True), deterministic.to_list(), strict=True
        )
    ]
    added = pl.DataFrame(rows, schema=VARIANT_COLUMNS).with_columns(
        pl.col(pl.Float64).fill_nan(None)
    )
    return pl.concat([wide, added], how="horizontal")


def bias_robust(part: pl.DataFrame) -> dict:
    """One bias's variants: the mean robust signed BSI, how many variants a few answers dominate,
    the answers outside the plausible range, and a note saying so (None when there is nothing
    to say). Choices: all None."""
    if "bsi_robust_signed" not in part.columns or part["kind"][0] != "number":
        return dict.fromkeys(
            ("bsi_robust_signed", "dominated_variants", "n_implausible", "robust_note")
        )
    robust = part["bsi_robust_signed"].drop_nulls()
    dominated = part.filter(pl.col("dominated").fill_null(False))["variant"].to_list()
    ranged = part["n_implausible"].drop_nulls()
    out = {
        "bsi_robust_signed": float(robust.mean()) if robust.len() else None,
        "dominated_variants": len(dominated) if part["dominated"].is_not_null().any() else None,
        "n_implausible": int(ranged.sum()) if ranged.len() else None,
    }
    notes = []
    if dominated:
        notes.append(
            f"a few answers dominate the mean in {len(dominated)} of {part.height} variants "
            f"({', '.join(dominated)}); robust signed BSI {out['bsi_robust_signed']:.3g}"
        )
    if out["n_implausible"]:
        notes.append(
            f"{out['n_implausible']} answer(s) outside the variants' plausible range, kept in "
            "the BSI"
        )
    return out | {"robust_note": "; ".join(notes) or None}

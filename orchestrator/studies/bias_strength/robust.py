"""Beside the paper's BSI, for variants answered with numbers: what a few extreme answers
would hide. The BSI of a number is (mean_T - mean_C) / (anchor - mean_C); one answer of 1.5e22
makes it 1e19 and its bootstrap σ_stat as large, with nothing to say why.

Per variant (analysis/robust.py has the statistics):
- hl_shift [hl_ci_low, hl_ci_high]: the Hodges-Lehmann shift of treatment over control with,
  as its 95% CI, the shifts the Brunner-Munzel test does not reject, which needs no pure shift:
  anchoring narrows the treated answers (none at T=0, nor below 6 answers a condition), and
  bsi_robust_signed = hl_shift / (anchor - median_C), the signed
  BSI with the means replaced by their robust counterparts;
- dominated: leaving out the two answers farthest from their condition's median moves
  mean_T - mean_C by more than the full width of its Welch CI without them and by a quarter of
  its size or of the answers' SD (analysis/robust.py leave_two_out; None: too few answers, or
  T=0, where the answers are one draw repeated);
- n_implausible_C/T and n_implausible: valid answers outside the variant's plausibleRange, where
  the job declares one. They stay in the BSI.

Per bias:
- bsi_robust_signed: the MEDIAN of the variants' robust signed BSIs (a mean would let one
  runaway variant through: at T=0 a variant's shift is one answer's), with the order-statistic
  interval for that median, bsi_robust_ci_low/high at bsi_robust_level: 95% from 6 variants,
  below that [min, max] at its own level (75%, 87.5%, 93.75% for 3, 4, 5 variants; the note
  says so), none for one variant. It is an interval over wordings, as the variant t-test's;
- dominant_variant: the variant whose BSI carries the mean signed BSI (the paper's measure):
  leaving out the variant farthest from the variants' median moves the mean by more than
  the larger of 1 (DOMINANT_MOVE: the whole distance from the control's answers to the
  anchor) and |the mean without it| (bsi_signed_without_dominant): the mean more than doubles
  or flips its sign on that one variant. It reads the variants' BSIs, so it holds at T=0; it
  needs 3 variants;
- dominated_variants: how many variants a few answers dominate, and the implausible answers;
  with a note.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.robust import hodges_lehmann, leave_two_out, outside
from orchestrator.analysis.stats import median_interval
from orchestrator.report.format import fmt

# In BSI units (1: the control's answers moved all the way to the anchor), or the rest's mean
# where that is larger. Leaving one variant out moves the mean of K by 1/K of its distance from
# the others' mean, so it must stand 3 (of 3 variants) or 4 (of 4) from the rest. Ordinary
# wordings differ by a few tenths (0.25, 0.11, 0.08 for anchors 800, 1800 and 2800 away), and
# a model that answers 2000 whatever the anchor (2.4, 1.06, 0.68) moves it by 0.5: neither is
# flagged; one answer of 1.5e22 among 40 makes a variant's BSI 5e17
DOMINANT_MOVE = 1.0

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


SUMMARY_COLUMNS = {
    "bsi_robust_signed": pl.Float64,
    "bsi_robust_ci_low": pl.Float64,
    "bsi_robust_ci_high": pl.Float64,
    "bsi_robust_level": pl.Float64,
    "dominated_variants": pl.Int64,
    "dominant_variant": pl.String,
    "bsi_signed_without_dominant": pl.Float64,
    "n_implausible": pl.Int64,
    "robust_note": pl.String,
}


def robust_interval(values: np.ndarray) -> tuple[float, float, float]:
    """(low, high, achieved level) for the median of the variants' robust BSIs: the
    order-statistic interval at 95% from 6 variants on; below that no pair reaches 95%, and
    the widest one, [min, max], is given at its own level 1 - 2^(1-K) (75% for 3 variants,
    87.5% for 4, 93.75% for 5). NaN for a single variant."""
    k = len(values)
    if k < 2:
        return np.nan, np.nan, np.nan
    low, high, level = median_interval(values)
    if np.isnan(level):
        low, high, level = float(np.min(values)), float(np.max(values)), 1 - 2.0 ** (1 - k)
    return float(low), float(high), float(level)


def dominant_variant(variants: list[str], signed: np.ndarray) -> tuple[str | None, float]:
    """The variant that carries the mean signed BSI, and the mean without it: leaving out the
    variant farthest from the variants' median moves the mean by more than the larger of
    DOMINANT_MOVE (on the BSI's scale, where 1 is the whole distance from the control's answers
    to the anchor) and |the mean without it| (the mean more than doubles, or changes sign, on
    that one variant). It reads the variants' BSIs only, so it holds at T=0 as
    well. (None, NaN) with fewer than 3 variants (of 2, neither is farther from their median
    than the other)."""
    if len(signed) < 3:
        return None, np.nan
    far = int(np.argmax(np.abs(signed - np.median(signed))))
    without = float(np.delete(signed, far).mean())
    moved = abs(float(signed.mean()) - without)
    return (variants[far] if moved > max(DOMINANT_MOVE, abs(without)) else None), without


def bias_robust(part: pl.DataFrame) -> dict:
    """One bias's variants: the median robust signed BSI with its interval, the variant that
    dominates the mean BSI, how many variants a few answers dominate, the answers outside the
    plausible range, and a note saying so (None when there is nothing to say). Choices: all
    None."""
    if "bsi_robust_signed" not in part.columns or part["kind"][0] != "number":
        return dict.fromkeys(SUMMARY_COLUMNS)
    robust = part["bsi_robust_signed"].drop_nulls().to_numpy()
    low, high, level = robust_interval(robust)
    dominated = part.filter(pl.col("dominated").fill_null(False))["variant"].to_list()
    ranged = part["n_implausible"].drop_nulls()
    valid = part.filter(pl.col("bsi_signed").is_not_null())
    dominant, without = dominant_variant(valid["variant"].to_list(), valid["bsi_signed"].to_numpy())
    out = {
        "bsi_robust_signed": float(np.median(robust)) if len(robust) else None,
        "bsi_robust_ci_low": low,
        "bsi_robust_ci_high": high,
        "bsi_robust_level": level,
        "dominated_variants": len(dominated) if part["dominated"].is_not_null().any() else None,
        "dominant_variant": dominant,
        "bsi_signed_without_dominant": without if dominant else None,
        "n_implausible": int(ranged.sum()) if ranged.len() else None,
    }
    notes = []
    if dominant:
        notes.append(
            f"variant {dominant} dominates the mean signed BSI: "
            f"{valid['bsi_signed'].to_numpy().mean():.3g}, without it {without:.3g}"
        )
    if dominated:
        notes.append(
            f"a few answers dominate the mean in {len(dominated)} of {part.height} variants "
            f"({', '.join(dominated)})"
        )
    if len(robust) and (dominant or dominated or not level >= 0.95):
        notes.append(f"robust signed BSI {_robust_text(len(robust), out)}")
    if out["n_implausible"]:
        notes.append(
            f"{out['n_implausible']} answer(s) outside the variants' plausible range, kept in "
            "the BSI"
        )
    return out | {"robust_note": "; ".join(notes) or None}


def _robust_text(k: int, out: dict) -> str:
    """The median robust BSI and its interval, saying its level when it is not 95%."""
    estimate = f"{out['bsi_robust_signed']:.3g} (median of {k} variant{'s' * (k > 1)})"
    if k < 2:
        return f"{estimate}, no interval"
    interval = f"[{out['bsi_robust_ci_low']:.3g}, {out['bsi_robust_ci_high']:.3g}]"
    if out["bsi_robust_level"] >= 0.95:
        return f"{estimate} {interval}"
    return f"{estimate} {interval} at {100 * out['bsi_robust_level']:.4g}% (min-max; 95% needs 6)"


def dagger(r: dict) -> str:
    """† for a mean signed BSI that one variant, or a few answers in a variant, carry."""
    return " †" if r.get("dominated_variants") or r.get("dominant_variant") else ""


def robust_cell(r: dict) -> str:
    """The median robust signed BSI with its interval, its level in brackets below 95%."""
    if r.get("bsi_robust_signed") is None:
        return "–"
    if r.get("bsi_robust_ci_low") is None:
        return fmt(r["bsi_robust_signed"])
    level = r["bsi_robust_level"]
    return (
        f"{fmt(r['bsi_robust_signed'])} [{fmt(r['bsi_robust_ci_low'])}, "
        f"{fmt(r['bsi_robust_ci_high'])}]" + (f" ({100 * level:.4g}%)" if level < 0.95 else "")
    )

"""What each debiasing strategy removed, with its uncertainty.

Per model x bias: each strategy's BSI (mean |BSI| over its variants, as in the summary) beside
the baseline's, the relative reduction 1 - BSI_strategy / BSI_baseline as in the paper, and the
difference strategy - baseline of the signed BSI with a percentile bootstrap CI. The bootstrap
resamples the trials of every variant x condition of both arms (bootstrap.signed_draws), so the
CI carries the sampling noise of the baseline as well as of the strategy; the variants are held
fixed, so it says nothing about other wordings. With 100 trials per cell, noise alone moves the
reduction of a weak bias by tens of percent either way (and by hundreds near 0), so the report
shows a reduction only where this CI excludes 0.

Why the signed difference decides: the same interval for the |BSI| difference (diff_ci_*, kept
in the results) bootstraps absolute values of noise, which cannot fall below 0; near 0 it
covered a true null difference 99-100% of the time, a test with no power. The signed one
holds its 95%, and shows a strategy that overshoots into the opposite direction.

At temperature 0 the answers of a variant x condition are one answer repeated (they differ only
by the option order shown): resampling them as independent trials would invent sampling noise,
so those rows get the difference without a CI, as the seed-000 analysis does (paired/analysis.py).
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl

from orchestrator.analysis.stats import BOOTSTRAP, ZERO
from orchestrator.studies.bias_strength.bootstrap import Cells, signed_draws
from orchestrator.studies.bias_strength.inference import snap_zero

KEYS = ["modelKey", "model", "experimentSlug", "bias"]
LEVEL = 0.95
DETERMINISTIC = (
    "T=0: answers repeat, so Δ is exact for these prompts and option orders; no CI "
    "(resampling repeated answers as independent trials would invent noise), so no reduction shown"
)


def _interval(draws: np.ndarray) -> tuple[float, float]:
    kept = draws[np.isfinite(draws)]
    if len(kept) < 2:
        return np.nan, np.nan
    lo, hi = np.percentile(kept, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
    return float(lo), float(hi)


def _estimates(bsi: np.ndarray, signed: np.ndarray, base: np.ndarray, arm: np.ndarray) -> dict:
    bsi_b, bsi_s = float(bsi[base].mean()), float(bsi[arm].mean())
    return {
        "bsi": bsi_s,
        "bsi_baseline": bsi_b,
        "K": len(arm),
        "K_baseline": len(base),
        "reduction": 1 - bsi_s / bsi_b if bsi_b > 0 else None,
        "diff": bsi_s - bsi_b,
        "signed_diff": float(signed[arm].mean() - signed[base].mean()),
    }


def _intervals(base_draws: np.ndarray, draws: np.ndarray) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample where no variant has a draw
        boot = np.nanmean(np.abs(draws), axis=0) - np.nanmean(np.abs(base_draws), axis=0)
        boot_signed = np.nanmean(draws, axis=0) - np.nanmean(base_draws, axis=0)
    (low, high), (signed_low, signed_high) = _interval(boot), _interval(boot_signed)
    return {
        "diff_ci_low": low,
        "diff_ci_high": high,
        "signed_ci_low": signed_low,
        "signed_ci_high": signed_high,
        # a bound within rounding error of 0 (a sum of shares k/n) is 0, as the table shows it
        "ci_excludes_zero": None
        if np.isnan(signed_low)
        else bool(signed_low > ZERO or signed_high < -ZERO),
    }


def debiasing(variants: pl.DataFrame, seed: int, resamples: int = BOOTSTRAP) -> pl.DataFrame:
    """One row per model x bias x non-baseline strategy (variant rows from analysis.variant_bsi)."""
    rng = np.random.default_rng([seed, 2])
    valid = variants.filter(pl.col("bsi").is_not_null())
    cells = Cells.of(valid)
    bsi, signed = valid["bsi"].to_numpy(), valid["bsi_signed"].to_numpy()
    fixed = (
        valid.get_column("deterministic", default=pl.Series([False] * valid.height))
        .fill_null(False)
        .to_numpy()
    )
    arms = (
        valid.with_row_index("row")
        .group_by(*KEYS, "strategy", maintain_order=True)
        .agg(pl.col("row"))
        .sort(KEYS, maintain_order=True)
        .rows(named=True)
    )  # a key's arms together
    baselines = {
        tuple(a[k] for k in KEYS): np.asarray(a["row"]) for a in arms if a["strategy"] == "baseline"
    }
    rows, base_draws = [], {}
    for a in arms:
        key = tuple(a[k] for k in KEYS)
        if a["strategy"] == "baseline":
            continue
        arm, base = np.asarray(a["row"]), baselines.get(key)
        row = dict(zip(KEYS, key, strict=True)) | {"strategy": a["strategy"]}
        if base is None:  # no baseline to compare with
            rows.append(row | {"bsi": float(bsi[arm].mean()), "K": len(arm)})
            continue
        row |= _estimates(bsi, signed, base, arm)
        if fixed[arm].any() or fixed[base].any():
            rows.append(row | {"deterministic": True, "note": DETERMINISTIC})
            continue
        if key not in base_draws:  # one set of baseline draws for all of its strategies
            base_draws = {key: signed_draws(cells.take(base), rng, resamples)}
        rows.append(
            row
            | {"deterministic": False}
            | _intervals(base_draws[key], signed_draws(cells.take(arm), rng, resamples))
        )
    schema = {k: pl.String for k in (*KEYS, "strategy")} | {
        "bsi": pl.Float64,
        "bsi_baseline": pl.Float64,
        "K": pl.Int64,
        "K_baseline": pl.Int64,
        "reduction": pl.Float64,
        "diff": pl.Float64,
        "diff_ci_low": pl.Float64,
        "diff_ci_high": pl.Float64,
        "signed_diff": pl.Float64,
        "signed_ci_low": pl.Float64,
        "signed_ci_high": pl.Float64,
        "ci_excludes_zero": pl.Boolean,
        "deterministic": pl.Boolean,
        "note": pl.String,
    }
    table = pl.DataFrame(rows, schema=schema).with_columns(pl.col(pl.Float64).fill_nan(None))
    return snap_zero(
        table,
        [
            "bsi",
            "bsi_baseline",
            "diff",
            "diff_ci_low",
            "diff_ci_high",
            "signed_diff",
            "signed_ci_low",
            "signed_ci_high",
            "reduction",
        ],
    ).sort("experimentSlug", "model", "strategy")

"""Per bias x model (x strategy): the BSI with its uncertainty decomposition, the variant-level
t-test and the trial-level mixed model (mixed.py; each Benjamini-Hochberg corrected within a
strategy), and parse failures by condition (debiasing.py: what each strategy removed)."""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

from orchestrator.analysis.stats import ZERO, bh, zero
from orchestrator.studies.bias_strength.mixed import choice_models, numeric_models
from orchestrator.studies.bias_strength.robust import SUMMARY_COLUMNS, bias_robust

GROUP = ["modelKey", "model", "strategy", "experimentSlug", "bias", "kind"]
# The tests count variants (CR2 over variants, the variant t-test), so they stand at T=0; the
# bootstrap within a variant does not: its answers differ only by the option order shown.
DETERMINISTIC = (
    "T=0: one answer per prompt, repeated; σ_stat reflects option orders, not sampling "
    "noise, and the tests rest on the variants"
)
# estimates and spreads on the BSI's scale (never p-values: a p of 1e-15 is a real result)
SNAPPED = [
    "bsi",
    "bsi_signed",
    "sigma_stat",
    "sigma_sys",
    "sigma_tot",
    "mixed_effect",
    "mixed_tau",
    "robust_effect",
    "t_stat",
    "bsi_robust_signed",
    "bsi_robust_ci_low",
    "bsi_robust_ci_high",
    "bsi_signed_without_dominant",
]


def snap_zero(df: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Values within ZERO of 0 become 0 (and -0.0 becomes 0.0), so a table shows 0, not 4.39e-17 or -0."""
    return df.with_columns(zero(pl.col(c)).alias(c) for c in columns if c in df.columns)


def bias_summary(variants: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for key, part in variants.group_by(GROUP, maintain_order=True):
        valid = part.filter(pl.col("bsi").is_not_null())
        bsi, signed = valid["bsi"].to_numpy(), valid["bsi_signed"].to_numpy()
        sigmas = valid["sigma_stat"].drop_nulls().to_numpy()
        sigma_stat = (
            float(np.mean(sigmas)) if len(sigmas) else np.nan
        )  # none when n <= 1 everywhere
        k = len(bsi)
        sigma_sys = float(np.std(bsi, ddof=1)) if k >= 2 else np.nan
        flat = k >= 2 and np.ptp(signed) <= ZERO  # identical in every variant: no spread, no t-test
        t = stats.ttest_1samp(signed, 0.0) if k >= 2 and not flat else None
        row = dict(zip(GROUP, key, strict=True)) | {
            "K": k,
            "bsi": float(np.mean(bsi)) if k else np.nan,
            "bsi_signed": float(np.mean(signed)) if k else np.nan,
            "sigma_stat": sigma_stat,
            "sigma_sys": sigma_sys,
            # one variant says nothing about wording: sigma_sys is unknown, not 0, and so is sigma_tot
            "sigma_tot": float(np.sqrt(sigma_stat**2 + sigma_sys**2)) if k >= 2 else np.nan,
            "sigma_note": "; ".join(
                n
                for n in (
                    None
                    if k >= 2
                    else f"K = {k}: σ_sys unknown (needs two prompt variants), so σ_tot too",
                    DETERMINISTIC
                    if part.get_column("deterministic", default=pl.Series([False])).any()
                    else None,
                )
                if n
            )
            or None,
            "t_stat": float(t.statistic) if t else np.nan,
            "p_variant": float(t.pvalue) if t else np.nan,
            "extra_share_T": _extra_share(part),
        }
        models = numeric_models(part) if key[-1] == "number" else choice_models(part)
        if (
            flat and not models["identical_effect"]
        ):  # the mixed model's effects still differ (log odds)
            row["sigma_note"] = "; ".join(
                filter(
                    None,
                    (
                        f"identical signed BSI in all {k} variants: no variant t-test",
                        row["sigma_note"],
                    ),
                )
            )
        rows.append(row | models | bias_robust(part))
    df = pl.DataFrame(rows, infer_schema_length=None).with_columns(
        pl.col("sigma_note").cast(pl.String),
        *(pl.col(name).cast(dtype) for name, dtype in SUMMARY_COLUMNS.items()),
    )
    for col in (
        "mixed_effect",
        "mixed_p",
        "odds_ratio",
        "or_ci_low",
        "or_ci_high",
        "robust_effect",
        "robust_p",
        "reason",
    ):
        if col not in df.columns:
            df = df.with_columns(
                pl.lit(None, dtype=pl.String if col == "reason" else pl.Float64).alias(col)
            )
    parts = []
    for _, part in df.group_by("strategy", maintain_order=True):  # BH across bias x model tests
        parts.append(
            part.with_columns(
                pl.Series("q_variant", bh(part["p_variant"].fill_null(np.nan).to_numpy())),
                pl.Series("q_mixed", bh(part["mixed_p"].fill_null(np.nan).to_numpy())),
            )
        )
    df = snap_zero(pl.concat(parts).with_columns(pl.col(pl.Float64).fill_nan(None)), SNAPPED)
    return df.with_columns(
        significant_variant=pl.col("q_variant") < 0.05, significant_mixed=pl.col("q_mixed") < 0.05
    ).sort(
        pl.col("strategy") != "baseline", "strategy", "experimentSlug", "model"
    )  # baseline first


def _extra_share(part: pl.DataFrame) -> float:
    """Share of treatment answers in roles the control lacks (the decoy), over the bias's variants;
    NaN when both conditions show the same roles."""
    if "extra_share_T" not in part.columns or part["extra_share_T"].is_null().all():
        return np.nan
    extra = part["n_extra_T"].fill_null(0).sum()
    return float(extra / (extra + part["n_T"].fill_null(0).sum())) if extra else 0.0


def parse_failures(variants: pl.DataFrame) -> pl.DataFrame:
    """Parse-failure rate by model x strategy x condition, and whether failures depend on the
    condition (chi-square test of independence; Fisher's exact test when a cell is small)."""
    totals = (
        variants.group_by("modelKey", "model", "strategy")
        .agg(
            pl.col("n_parse_error_C").sum().alias("pe_C"),
            pl.col("n_records_C").sum().alias("rec_C"),
            pl.col("n_parse_error_T").sum().alias("pe_T"),
            pl.col("n_records_T").sum().alias("rec_T"),
        )
        .sort("model", pl.col("strategy") != "baseline", "strategy")
    )
    p_values = []
    for r in totals.iter_rows(named=True):
        table = np.array([[r["pe_C"], r["rec_C"] - r["pe_C"]], [r["pe_T"], r["rec_T"] - r["pe_T"]]])
        if table[:, 0].sum() == 0 or table[:, 1].sum() == 0:
            p_values.append(None)
        elif (stats.contingency.expected_freq(table) < 5).any():
            p_values.append(float(stats.fisher_exact(table).pvalue))
        else:
            p_values.append(float(stats.chi2_contingency(table).pvalue))
    return totals.with_columns(
        (pl.col("pe_C") / pl.col("rec_C")).alias("parse_error_rate_control"),
        (pl.col("pe_T") / pl.col("rec_T")).alias("parse_error_rate_treatment"),
        pl.Series("p_depends_on_condition", p_values, dtype=pl.Float64),
    )


def effect_table(tables: dict[str, pl.DataFrame], study: str) -> pl.DataFrame:
    """The signed BSI per model x strategy x experiment for compare and trend, with the standard
    error of its mean over the K variants, SD/sqrt(K), on K - 1 degrees of freedom: the interval
    the variant t-test (p_variant) inverts. It spans the wording spread as well as sampling, so
    between two nights of the same prompts it is conservative. Null for K < 2."""
    from orchestrator.analysis.effects import effect_rows

    keys = ["modelKey", "strategy", "experimentSlug"]
    signed = pl.col("bsi_signed")
    se = (
        tables["bsi_variants"]
        .filter(signed.is_not_null())
        .group_by(keys)
        .agg(se=pl.when(pl.len() >= 2).then(signed.std(ddof=1) / pl.len().sqrt()))
    )
    summary = (
        tables["bsi_summary"]
        .join(se, on=keys, how="left")
        .with_columns(df=(pl.col("K") - 1).cast(pl.Float64))
    )
    dof = summary["df"].to_numpy()
    t = pl.Series(stats.t.ppf(0.975, np.where(dof >= 1, dof, np.nan))).fill_nan(None)
    # the median robust BSI's interval where it reaches 95% (6 variants on): the effects
    # table's robust interval is read as one, and [min, max] of 3-5 variants is 75-94%
    at95 = pl.col("bsi_robust_level") >= 0.95
    summary = summary.with_columns(
        lo=signed - t * pl.col("se"),
        hi=signed + t * pl.col("se"),
        robust_lo=pl.when(at95).then("bsi_robust_ci_low"),
        robust_hi=pl.when(at95).then("bsi_robust_ci_high"),
    )
    return effect_rows(
        summary,
        study,
        "signed BSI",
        "experimentSlug",
        "bsi_signed",
        "lo",
        "hi",
        p="p_variant",
        n="K",
        se="se",
        df=pl.when(pl.col("se").is_not_null()).then("df"),
        # numbers: the median of the variants' robust signed BSIs
        robust=("bsi_robust_signed", "robust_lo", "robust_hi"),
        dominated=(pl.col("dominated_variants") > 0) | pl.col("dominant_variant").is_not_null(),
        implausible="n_implausible",
    )

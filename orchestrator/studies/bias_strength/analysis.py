"""The Bias Strength Index (seed 001) per variant, bias and model, with its uncertainties.

Per variant: BSI = |mean_T - mean_C| / |anchor - mean_C| for numbers, |p_T - p_C| for choices
(p = share choosing the bias-predicted role); the signed versions keep the direction (positive =
bias-predicted). When the treatment shows roles the control lacks (the decoy's third option), p
is the attraction-effect measure: the share of the predicted role among the answers in the roles
both conditions show (target or competitor), and answers in the extra roles are counted apart
(n_extra_*). Otherwise a respondent answering at random would score 1/3 - 1/2 from the option
count alone. k_*/n_* stay the successes/trials of the measure, which the mixed models read.
sigma_stat per variant is the SD of |BSI| over bootstrap resamples of each condition
(bootstrap.py). Per bias: mean BSI over the K variants, sigma_sys = their SD (unknown for K < 2),
sigma_tot = sqrt((mean sigma_stat)^2 + sigma_sys^2), as in the paper (its sigma_stat bar is the
average per-variant sigma_stat). Numbers also get a robust BSI and flags beside it (robust.py).
Models and strategies are never pooled.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.load import Run, final_records
from orchestrator.spec.models import Variant
from orchestrator.studies.bias_strength import KIND
from orchestrator.studies.bias_strength.bootstrap import bootstrap_sigma
from orchestrator.studies.bias_strength.robust import with_robust

ROW_KEYS = ["modelKey", "strategy", "experimentSlug", "variant"]


def measure_roles(control: Variant, treatment: Variant) -> tuple[list[str], bool]:
    """The roles whose answers the measure counts, and whether a condition shows other roles:
    the roles both conditions show, when the predicted role is among them (else every role)."""
    shared = [r for r in treatment.contract.roles if r in control.contract.roles]
    extra = set(control.contract.roles) != set(treatment.contract.roles)
    if not extra or treatment.predicted not in shared:
        return list(dict.fromkeys(control.contract.roles + treatment.contract.roles)), False
    return shared, True


def variant_table(run: Run) -> pl.DataFrame:
    rows = []
    for job in run.jobs.values():
        if job.kind != KIND:
            continue
        for e in job.experiments:
            controls = {v.id: v for v in e.conditions[0].variants}
            for v in e.conditions[1].variants:
                roles, extra = measure_roles(controls[v.id], v)
                rows.append(
                    {
                        "job": job.id,
                        "experimentSlug": e.slug,
                        "variant": v.id,
                        "bias": e.metric.label,
                        "kind": v.contract.kind,
                        "predicted": v.predicted,
                        "anchor": v.anchor,
                        "domain": v.domain,
                        "measure_roles": roles,
                        "has_extra_roles": extra,
                        "plausible_low": (v.plausible_range or (None, None))[0],
                        "plausible_high": (v.plausible_range or (None, None))[1],
                    }
                )
    return pl.DataFrame(
        rows,
        schema={
            "job": pl.String,
            "experimentSlug": pl.String,
            "variant": pl.String,
            "bias": pl.String,
            "kind": pl.String,
            "predicted": pl.String,
            "anchor": pl.Float64,
            "domain": pl.String,
            "measure_roles": pl.List(pl.String),
            "has_extra_roles": pl.Boolean,
            "plausible_low": pl.Float64,
            "plausible_high": pl.Float64,
        },
    )


def cell_counts(run: Run, variants: pl.DataFrame) -> pl.DataFrame:
    """Per model x strategy x bias x variant x condition: counts, mean, predicted-role count among
    the measured answers (n; n_extra in roles outside the measure) and, for numeric variants, the
    valid values themselves (for the bootstrap)."""
    ok = pl.col("status") == "ok"
    measured = (pl.col("kind") == "number") | pl.col("measure_roles").list.contains(pl.col("role"))
    return (
        final_records(run)
        .join(
            variants.lazy().select(
                "job", "experimentSlug", "variant", "predicted", "kind", "measure_roles"
            ),
            on=["job", "experimentSlug", "variant"],
        )
        .group_by(*ROW_KEYS, "conditionIndex")
        .agg(
            n_records=pl.len(),
            n=(ok & measured).sum(),
            n_extra=(ok & ~measured).sum(),
            n_parse_error=(pl.col("status") == "parse_error").sum(),
            n_refused=(pl.col("status") == "refused").sum(),
            k=(pl.col("role") == pl.col("predicted")).filter(ok).sum(),
            mean=pl.col("value").filter(ok).mean(),
            values=pl.col("value").filter(ok & (pl.col("kind") == "number")),
        )
        .collect()
    )


def _wide(cells: pl.DataFrame, variants: pl.DataFrame) -> pl.DataFrame:
    parts = [
        cells.filter(pl.col("conditionIndex") == c)
        .drop("conditionIndex")
        .rename(lambda name, c=c: name if name in ROW_KEYS else f"{name}_{'CT'[c]}")
        for c in (0, 1)
    ]
    wide = parts[0].join(parts[1], on=ROW_KEYS, how="full", coalesce=True)
    wide = wide.join(
        variants.select(
            "experimentSlug",
            "variant",
            "bias",
            "kind",
            "anchor",
            "domain",
            "has_extra_roles",
            "plausible_low",
            "plausible_high",
        ),
        on=["experimentSlug", "variant"],
    ).sort(ROW_KEYS)
    # the extra role's pull, shown apart from the measure (null where both conditions show the same roles)
    return wide.with_columns(
        *(
            pl.when(pl.col("has_extra_roles"))
            .then(pl.col(f"n_extra_{c}") / (pl.col(f"n_{c}") + pl.col(f"n_extra_{c}")))
            .alias(f"extra_share_{c}")
            for c in "CT"
        )
    ).drop("has_extra_roles")


def _signed(
    kind: np.ndarray, stat_c: np.ndarray, stat_t: np.ndarray, anchor: np.ndarray
) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        numeric = (stat_t - stat_c) / (anchor - stat_c)
        # toward the anchor is the predicted direction, whichever side of the control it lies
        return np.where(kind == "number", numeric, stat_t - stat_c)


def variant_bsi(run: Run) -> pl.DataFrame:
    """One row per model x strategy x bias x variant: stats per condition, signed and absolute
    BSI, sigma_stat."""
    variants = variant_table(run)
    if variants.is_empty():
        return pl.DataFrame()
    wide = _wide(cell_counts(run, variants), variants)
    kind = wide["kind"].to_numpy()
    n_c, n_t = wide["n_C"].fill_null(0).to_numpy(), wide["n_T"].fill_null(0).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        stat_c = np.where(
            kind == "number",
            wide["mean_C"].fill_null(np.nan).to_numpy(),
            wide["k_C"].fill_null(0).to_numpy() / n_c,
        )
        stat_t = np.where(
            kind == "number",
            wide["mean_T"].fill_null(np.nan).to_numpy(),
            wide["k_T"].fill_null(0).to_numpy() / n_t,
        )
    signed = _signed(kind, stat_c, stat_t, wide["anchor"].fill_null(np.nan).to_numpy())
    signed = np.where((n_c > 0) & (n_t > 0), signed, np.nan)
    sigma = bootstrap_sigma(wide, seed=run.manifest["plan"]["seed"])
    label = pl.col("modelKey").replace_strict(run.models, default=pl.col("modelKey")).alias("model")
    fixed = pl.col("modelKey").replace_strict(
        run.deterministic, default=False, return_dtype=pl.Boolean
    )
    wide = with_robust(wide, wide.select(fixed)["modelKey"])
    return wide.with_columns(
        fixed.alias("deterministic"),
        pl.Series("stat_C", stat_c).fill_nan(None),
        pl.Series("stat_T", stat_t).fill_nan(None),
        pl.Series("bsi_signed", signed).fill_nan(None),
        pl.Series("bsi", np.abs(signed)).fill_nan(None),
        pl.Series("sigma_stat", sigma).fill_nan(None),
        label,
    )

"""Effects of the two-condition (seed-000 family) experiments, per experiment x model identity.

Answers are never pooled across models or strategies: each row is one experiment on one model
identity under one strategy, comparing condition 0 with condition 1 in the spec's direction, so
a positive effect is the bias-predicted one.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from orchestrator.analysis.load import Run, final_records
from orchestrator.analysis.stats import newcombe, welch
from orchestrator.studies.paired import robust

KEYS = ["job", "experimentSlug", "strategy", "modelKey"]


def metric_table(run: Run) -> pl.DataFrame:
    rows = [
        {
            "job": job.id,
            "experimentSlug": e.slug,
            "metric_type": e.metric.type,
            "direction": e.metric.direction,
            "label": e.metric.label,
            "unit": e.metric.unit,
            "target_option": e.metric.target_option,
            "variants": len(e.conditions[0].variants),
            # the job's plausibleRange (every variant of a paired experiment carries the same)
            "plausible_low": _plausible(e, 0),
            "plausible_high": _plausible(e, 1),
        }
        for job in run.jobs.values()
        if job.kind == "paired"
        for e in job.experiments
        if len(e.conditions) == 2
    ]
    return pl.DataFrame(
        rows,
        schema_overrides={
            "target_option": pl.String,
            "plausible_low": pl.Float64,
            "plausible_high": pl.Float64,
        },
    )


def _plausible(exp, end: int) -> float | None:
    found = exp.conditions[0].variants[0].plausible_range
    return found[end] if found else None


def model_table(run: Run, keys: list[str]) -> pl.DataFrame:
    """Per job x model identity: samples planned per cell, the protocol's minimum that applies,
    and whether the model is deterministic (temperature 0: its answers are one draw each)."""
    fixed = run.deterministic
    rows = [
        {
            "job": job.id,
            "modelKey": key,
            "deterministic": fixed.get(key, False),
            "planned_per_cell": run.planned_per_cell(job.id, key),
            "min_samples": job.min_samples_for(fixed.get(key, False)),
        }
        for job in run.jobs.values()
        if job.kind == "paired"
        for key in keys
    ]
    return pl.DataFrame(
        rows,
        schema={
            "job": pl.String,
            "modelKey": pl.String,
            "deterministic": pl.Boolean,
            "planned_per_cell": pl.Int64,
            "min_samples": pl.Int64,
        },
    )


def _options(exp, index: int) -> set[str]:
    return {o for v in exp.conditions[index].variants for o in v.contract.options}


def shared_options(run: Run) -> pl.Expr:
    """Whether an answer is one of the options both conditions list, for choice experiments whose
    conditions list different options (a decoy menu of 3 beside one of 2); false elsewhere. A share
    of the target moves with the number of options alone (a respondent at random: 1/2 vs 1/3), so
    the attraction effect is also read among the options both show. An expression, not a join:
    the few such experiments cost a comparison per record, not a hash join over all of them."""
    shared = pl.lit(False)
    for job in run.jobs.values():
        if job.kind != "paired":
            continue
        for e in job.experiments:
            if (
                len(e.conditions) == 2
                and e.metric.type == "choice-share-difference"
                and _options(e, 0) != _options(e, 1)
            ):
                here = (pl.col("job") == job.id) & (pl.col("experimentSlug") == e.slug)
                shared = (
                    pl.when(here)
                    .then(pl.col("choice").is_in(sorted(_options(e, 0) & _options(e, 1))))
                    .otherwise(shared)
                )
    return shared


def per_condition(run: Run, metrics: pl.DataFrame) -> pl.DataFrame:
    """Counts, mean and variance per row and condition, and the valid answers themselves
    (`values`, for the robust estimates; empty for a choice). The two are separate queries
    collected together, so that the records are read once: a list in the counts' query would
    take it off polars' streaming engine (~200 MB more on a million records)."""
    ok = pl.col("status") == "ok"
    keys = [*KEYS, "conditionIndex"]
    answered = final_records(run).join(
        metrics.lazy().select(
            "job", "experimentSlug", "target_option", "plausible_low", "plausible_high"
        ),
        on=["job", "experimentSlug"],
    )
    counts = answered.group_by(keys).agg(
        n_records=pl.len(),
        n_valid=ok.sum(),
        n_parse_error=(pl.col("status") == "parse_error").sum(),
        n_refused=(pl.col("status") == "refused").sum(),
        mean=pl.col("value").filter(ok).mean(),
        var=pl.col("value").filter(ok).var(ddof=1),
        n_target=(pl.col("choice") == pl.col("target_option")).filter(ok).sum(),
        n_shared=shared_options(run).fill_null(False).filter(ok).sum(),
        n_implausible=robust.implausible(ok),
        # max(), not first(): first() makes polars leave its streaming engine and hold
        # the whole file in memory. A model's version is one value per identity anyway.
        model_version=pl.col("model").struct.field("version").max(),
    )
    answers = robust.answers(answered, metrics, keys)
    per_cell, values = pl.collect_all([counts, answers], engine="streaming")
    return per_cell.join(values, on=keys, how="left", nulls_equal=True).with_columns(
        pl.col("values").fill_null([]),
        model=pl.col("modelKey").replace_strict(run.models, default=pl.col("modelKey")),
    )


def _wide(cond: pl.DataFrame) -> pl.DataFrame:
    """One row per experiment x model x strategy with the two conditions side by side; a
    condition with no records at all still gets a row (its counts are zero)."""
    parts = [
        cond.filter(pl.col("conditionIndex") == i)
        .drop("conditionIndex")
        .rename(lambda c, i=i: c if c in KEYS else f"{c}_{i}")
        for i in (0, 1)
    ]
    wide = parts[0].join(parts[1], on=KEYS, how="full", coalesce=True)
    counts = [c for c in wide.columns if c.startswith(("n_",))]
    return wide.with_columns(
        pl.col(counts).fill_null(0),
        pl.coalesce("model_0", "model_1").alias("model"),
        pl.coalesce("model_version_0", "model_version_1").alias("model_version"),
    )


def _effects(wide: pl.DataFrame) -> pl.DataFrame:
    """Effect, CI and p-value per row, in the spec's direction."""
    n0, n1 = wide["n_valid_0"].to_numpy().astype(float), wide["n_valid_1"].to_numpy().astype(float)
    is_mean = (wide["metric_type"] == "mean-difference").to_numpy()
    m0, m1 = (
        wide["mean_0"].fill_null(np.nan).to_numpy(),
        wide["mean_1"].fill_null(np.nan).to_numpy(),
    )
    v0, v1 = wide["var_0"].fill_null(np.nan).to_numpy(), wide["var_1"].fill_null(np.nan).to_numpy()
    t0, t1 = (
        wide["n_target_0"].to_numpy().astype(float),
        wide["n_target_1"].to_numpy().astype(float),
    )
    w = welch(m0, v0, n0, m1, v1, n1)
    c = newcombe(t0, n0, t1, n1)
    # A deterministic model's repeated answers are one draw: an interval or a test that counts
    # them as n independent samples would claim a certainty they do not have.
    fixed = wide["deterministic"].to_numpy()
    # condition0-minus-condition1 as computed; the other direction flips sign and interval.
    flip = (wide["direction"] == "condition1-minus-condition0").to_numpy()
    out = {}
    for name, idx in (("effect", 0), ("ci_low", 1), ("ci_high", 2), ("p_value", 3)):
        out[name] = np.where(is_mean, w[idx], c[idx])
        if idx:
            out[name] = np.where(fixed, np.nan, out[name])
    # a mean difference's Welch-Satterthwaite degrees of freedom (compare refers its change to t)
    out["df"] = np.where(is_mean & ~fixed.astype(bool), w[4], np.nan)
    low, high = out["ci_low"].copy(), out["ci_high"].copy()
    out["effect"] = np.where(flip, -out["effect"], out["effect"])
    out["ci_low"] = np.where(flip, -high, low)
    out["ci_high"] = np.where(flip, -low, high)
    # Among the options both conditions show; null where they show the same options.
    s0, s1 = (
        wide["n_shared_0"].to_numpy().astype(float),
        wide["n_shared_1"].to_numpy().astype(float),
    )
    attraction, a_low, a_high, a_p = newcombe(t1, s1, t0, s0)  # condition 1 minus 0
    shared = (s0 > 0) & (s1 > 0) & ~fixed
    out["attraction_effect"] = np.where(
        (s0 > 0) & (s1 > 0), np.where(flip, attraction, -attraction), np.nan
    )
    out["attraction_ci_low"] = np.where(shared, np.where(flip, a_low, -a_high), np.nan)
    out["attraction_ci_high"] = np.where(shared, np.where(flip, a_high, -a_low), np.nan)
    out["attraction_p"] = np.where(shared, a_p, np.nan)
    stat0 = np.where(is_mean, m0, t0 / np.where(n0 > 0, n0, np.nan))
    stat1 = np.where(is_mean, m1, t1 / np.where(n1 > 0, n1, np.nan))
    # NaN means "not estimable" here; as null it reads so in every output format.
    return wide.with_columns(
        pl.Series("stat_0", stat0).fill_nan(None),
        pl.Series("stat_1", stat1).fill_nan(None),
        *(pl.Series(k, v).fill_nan(None) for k, v in out.items()),
    )


def _flags(df: pl.DataFrame) -> pl.DataFrame:
    """What a reader must know before trusting a row: said, never silently averaged away."""
    rate = lambda i: pl.col(f"n_parse_error_{i}") / pl.col(f"n_records_{i}")  # noqa: E731
    flags: list[pl.Expr] = []
    for i in (0, 1):
        flags += [
            pl.when(pl.col(f"n_valid_{i}") == 0).then(pl.lit(f"no valid answers in condition {i}")),
            pl.when(pl.col(f"n_parse_error_{i}") > 0).then(
                pl.format(
                    f"parse errors c{i}: {{}}/{{}}",
                    pl.col(f"n_parse_error_{i}"),
                    pl.col(f"n_records_{i}"),
                )
            ),
            pl.when(pl.col(f"n_refused_{i}") > 0).then(
                pl.format(
                    f"refusals c{i}: {{}}/{{}}", pl.col(f"n_refused_{i}"), pl.col(f"n_records_{i}")
                )
            ),
            pl.when(pl.col(f"n_records_{i}") < pl.col("planned_per_condition")).then(
                pl.format(
                    f"unfinished c{i}: {{}}/{{}} answered",
                    pl.col(f"n_records_{i}"),
                    pl.col("planned_per_condition"),
                )
            ),
        ]
    flags += [
        pl.when(~pl.col("adequate")).then(
            pl.format(
                "valid n below the spec's minimum ({} < {})",
                pl.min_horizontal("n_valid_0", "n_valid_1"),
                pl.col("min_samples"),
            )
        ),
        pl.when(pl.col("attraction_effect").is_not_null()).then(
            pl.format(
                "the conditions list different options, so the share moves with their number "
                "alone; among the options both list, the target's share moves {}{}",
                pl.col("attraction_effect").round_sig_figs(3),
                pl.when(pl.col("attraction_p").is_not_null())
                .then(
                    pl.format(
                        " [{}, {}], p {}",
                        *(
                            pl.col(c).round_sig_figs(3)
                            for c in ("attraction_ci_low", "attraction_ci_high", "attraction_p")
                        ),
                    )
                )
                .otherwise(pl.lit("")),
            )
        ),
        *robust.robust_flags(),
        pl.when(pl.col("deterministic")).then(pl.lit(DETERMINISTIC)),
        pl.when(
            ~pl.col("deterministic") & pl.col("effect").is_not_null() & pl.col("p_value").is_null()
        ).then(pl.lit("no CI: too few answers or no variance")),
    ]
    return df.with_columns(pl.concat_list(flags).list.drop_nulls().alias("flags")).with_columns(
        rate(0).alias("parse_error_rate_0"),
        rate(1).alias("parse_error_rate_1"),
        (pl.col("n_refused_0") / pl.col("n_records_0")).alias("refusal_rate_0"),
        (pl.col("n_refused_1") / pl.col("n_records_1")).alias("refusal_rate_1"),
    )


DETERMINISTIC = (
    "deterministic answers at T=0: repeated draws are not independent samples; "
    "effect shown without CI/p"
)

COLUMNS = [
    "job",
    "experimentSlug",
    "strategy",
    "modelKey",
    "model",
    "model_version",
    "metric_type",
    "direction",
    "label",
    "unit",
    "target_option",
    "stat_0",
    "stat_1",
    "effect",
    "ci_low",
    "ci_high",
    "p_value",
    "df",
    "attraction_effect",
    "attraction_ci_low",
    "attraction_ci_high",
    "attraction_p",
    *robust.COLUMNS,
    "n_valid_0",
    "n_valid_1",
    "planned_per_condition",
    "min_samples",
    "deterministic",
    "adequate",
    "predicted_direction_observed",
    "significant",
    "parse_error_rate_0",
    "parse_error_rate_1",
    "refusal_rate_0",
    "refusal_rate_1",
    "n_parse_error_0",
    "n_parse_error_1",
    "n_refused_0",
    "n_refused_1",
    "n_records_0",
    "n_records_1",
    "flags",
]


def paired_effects(run: Run) -> pl.DataFrame:
    metrics = metric_table(run)
    cond = per_condition(run, metrics) if metrics.height else pl.DataFrame()
    if cond.is_empty():
        return pl.DataFrame(schema={c: pl.String for c in COLUMNS})
    values = robust.cell_values(cond, KEYS)
    cond = cond.drop("values")
    wide = (
        _wide(cond)
        .join(metrics, on=["job", "experimentSlug"])
        .join(model_table(run, cond["modelKey"].unique().to_list()), on=["job", "modelKey"])
        .with_columns(planned_per_condition=pl.col("planned_per_cell") * pl.col("variants"))
    )
    df = robust.with_robust(_effects(wide), values, KEYS)
    df = df.with_columns(
        adequate=pl.min_horizontal("n_valid_0", "n_valid_1") >= pl.col("min_samples"),
        predicted_direction_observed=pl.col("effect") > 0,
        significant=pl.col("p_value") < 0.05,
    )
    return _flags(df).select(COLUMNS).sort("job", "experimentSlug", "model", "strategy")


def effect_table(summary: pl.DataFrame, study: str) -> pl.DataFrame:
    """The effects for compare and trend. A share difference's standard error is the unbiased
    plug-in sqrt(sum p(1-p)/(n-1)): read off the Newcombe interval it would come out about 8%
    small at 20 answers per condition (the score interval is narrower than the sampling spread
    there), and nights would differ "significantly" too often. A mean difference's is read off
    its Welch interval, on its Welch-Satterthwaite degrees of freedom. None for a deterministic
    model."""
    from orchestrator.analysis.effects import effect_rows

    share = pl.col("metric_type") == "choice-share-difference"
    spread = sum(
        (pl.col(f"stat_{i}") * (1 - pl.col(f"stat_{i}")) / (pl.col(f"n_valid_{i}") - 1))
        for i in (0, 1)
    )
    # a share of 0 or 1 in both conditions has no plug-in spread: compare then reads the SE off
    # the Newcombe interval, which is not zero there
    se = pl.when(
        share
        & pl.col("ci_low").is_not_null()
        & (pl.min_horizontal("n_valid_0", "n_valid_1") > 1)
        & (spread > 0)
    ).then(spread.sqrt())
    return effect_rows(
        summary,
        study,
        "metric_type",
        "experimentSlug",
        "effect",
        "ci_low",
        "ci_high",
        p="p_value",
        n=pl.col("n_valid_0") + pl.col("n_valid_1"),
        se=se,
        df=pl.when(~share).then("df"),
        robust=("hl_effect", "hl_ci_low", "hl_ci_high"),
        dominated="dominated",
        implausible="n_implausible",
    )

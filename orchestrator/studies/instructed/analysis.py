"""The paper's bias scores (Equation 1): the share of answers choosing the target in treatment
minus that share in control, per model and strategy, pooled over the products (`bias_scores`),
per product (`product_scores`) and per decoy grid pair (`pair_scores`, the paper's Figure 6).

Which items and which target each score counts are in items.py. Shares are among parsed
answers; parse failures and refusals are counted beside them (`unparsed_*`). Every score gets
a 95% CI and p over value cells (inference.py `clustered`: the items built from the same
values are one draw), beside the paper's Student t-test (t, t_df, p_t) on the 0/1 "chose the
target" answers and Fisher's exact p (p_fisher, the one the tables show), which take every
prompt as independent. A decoy row's Equation 1 gets neither a p nor an interval (it is
biased by the option count: `DESCRIBED`); it also gets the
attraction measure: the same difference among the answers that chose the target or the
competitor (the decoy left out), since a third option alone lowers every option's share (from
1/2 to 1/3 for a respondent choosing at random), tested the same way.

A row with one value cell (a grid pair) has no test over items: its interval is Newcombe's
over prompts (`interval` says which), to be read as a description of that cell.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

from orchestrator.analysis.load import Run
from orchestrator.analysis.stats import newcombe, zero
from orchestrator.studies.instructed.answers import answers
from orchestrator.studies.instructed.inference import clustered, student
from orchestrator.studies.instructed.items import ITEM_KEYS, SCORES, experiments, items_frame

KEYS = ["modelKey", "strategy"]
PAIR_KEYS = ["experimentSlug", "pair", "target_price", "competitor_price"]
CELL_KEYS = ["job", "experimentSlug", "cluster"]
COUNTS = ("n", "unparsed", "hits", "n_decoy")


def scored_answers(run: Run, kind: str) -> pl.LazyFrame:
    """Every answer that counts, once per score its item counts in."""
    return answers(run, kind).join(items_frame(run, kind).lazy(), on=ITEM_KEYS)


def counts(joined: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """Per model, strategy, score, the `by` columns, value cell and condition: parsed answers
    (n), the target's count among them (hits), answers in the decoy (n_decoy), unparsed ones,
    and the answer modes seen."""
    ok = pl.col("status") == "ok"
    cells = [c for c in CELL_KEYS if c not in by]
    return joined.group_by(*KEYS, "score", *by, *cells, "conditionIndex").agg(
        n=ok.sum(),
        unparsed=(~ok).sum(),
        hits=(ok & (pl.col("role") == pl.col("target"))).sum(),
        n_decoy=(ok & (pl.col("role") == "decoy")).sum(),
        modes=pl.col("mode").unique(),
    )


def _wide(counted: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    arm = [counted.filter(pl.col("conditionIndex") == c).drop("conditionIndex") for c in (1, 0)]
    wide = (
        arm[0]
        .join(arm[1], on=keys, how="full", coalesce=True, suffix="_control")
        .rename(
            {
                "n": "n_treatment",
                "hits": "hits_treatment",
                "unparsed": "unparsed_treatment",
                "n_decoy": "n_decoy_treatment",
            }
        )
    )
    modes = pl.concat_list(pl.col("modes").fill_null([]), pl.col("modes_control").fill_null([]))
    return (
        wide.with_columns(modes.list.unique().list.sort().list.join("+").alias("mode"))
        .drop("modes", "modes_control", "n_decoy_control")
        .with_columns(pl.col(pl.UInt32, pl.Int64).fill_null(0).cast(pl.Int64))
    )


ARMS = [pl.col("conditionIndex") == c for c in (0, 1)]
# the attraction measure's answers: those that chose the decoy left out (control has none)
PAIR_ANSWERS = (pl.col("n") - pl.col("n_decoy")).alias("n_pair")


def per_cell(
    cells: pl.DataFrame, groups: list[pl.Expr], count: str = "n"
) -> tuple[np.ndarray, np.ndarray]:
    """(K, G) answers (the `count` column) and hits per value cell and group (`groups`: which
    rows of a cell's counts each group takes), the form inference.clustered takes."""
    wide = cells.group_by(CELL_KEYS).agg(
        *(pl.col(count).filter(g).sum().alias(f"n{i}") for i, g in enumerate(groups)),
        *(pl.col("hits").filter(g).sum().alias(f"k{i}") for i, g in enumerate(groups)),
    )
    return (
        wide.select(f"n{i}" for i in range(len(groups))).to_numpy(),
        wide.select(f"k{i}" for i in range(len(groups))).to_numpy(),
    )


CELL_TESTS = {
    "cells": pl.Int64,
    "se": pl.Float64,
    "df": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p": pl.Float64,
    "note": pl.String,
    "attraction_se": pl.Float64,
    "attraction_df": pl.Float64,
    "attraction_ci_low": pl.Float64,
    "attraction_ci_high": pl.Float64,
    "attraction_p": pl.Float64,
    "attraction_note": pl.String,
}


def cell_tests(counted: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per row (`keys`): the bias score's and the attraction measure's tests over value cells."""
    rows = []
    for key, cells in counted.group_by(keys, maintain_order=True):
        score = clustered(*per_cell(cells, ARMS))
        row = dict(zip(keys, key, strict=True)) | {k: score[k] for k in CELL_TESTS if k in score}
        if str(row["score"]).startswith("Decoy"):
            attraction = clustered(*per_cell(cells.with_columns(PAIR_ANSWERS), ARMS, "n_pair"))
            row |= {
                f"attraction_{k}": attraction[k]
                for k in ("se", "df", "ci_low", "ci_high", "p", "note")
            }
        rows.append(row)
    schema = {k: counted.schema[k] for k in keys} | CELL_TESTS
    return pl.DataFrame(rows, schema=schema, orient="row").fill_nan(None)


def score_tests(wide: pl.DataFrame) -> pl.DataFrame:
    """Shares, the bias score, the paper's Student t, the attraction measure and the Newcombe CI
    over prompts (`prompt_ci_*`) of each row of treatment (`*_treatment`) and control
    (`*_control`) counts."""
    kt, nt = wide["hits_treatment"].to_numpy(), wide["n_treatment"].to_numpy()
    kc, nc = wide["hits_control"].to_numpy(), wide["n_control"].to_numpy()
    diff, low, high, _ = newcombe(kt, nt, kc, nc)
    t, df, p_t = student(kt, nt, kc, nc)
    p_fisher = fisher(kt, nt, kc, nc)
    decoy = wide["score"].str.starts_with("Decoy").to_numpy()
    pair_t = nt - wide["n_decoy_treatment"].to_numpy()
    attraction = np.where(decoy, newcombe(kt, pair_t, kc, nc)[0], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        share_t, share_c = kt / nt, kc / nc
    return (
        wide.with_columns(
            pl.Series("share_treatment", share_t),
            pl.Series("share_control", share_c),
            pl.Series("bias_score", diff),
            pl.Series("prompt_ci_low", low),
            pl.Series("prompt_ci_high", high),
            pl.Series("t", t),
            pl.Series("t_df", df),
            pl.Series("p_t", p_t),
            pl.Series("p_fisher", p_fisher),
            pl.Series("attraction", attraction),
        )
        .fill_nan(None)
        .with_columns(zero(pl.col(c)).alias(c) for c in ("bias_score", "attraction"))
    )


def fisher(kt, nt, kc, nc) -> np.ndarray:
    """Fisher's exact p (two-sided) of each row's 2 x 2 table: the p over prompts the tables
    show. The paper's t-test p (`p_t`) is kept in the data but is not monotone in the counts:
    11/11 against 1/10 got p = 1.3e-8, stronger than 11/11 against 0/10 (Fisher 2.8e-6)."""
    return np.array(
        [
            stats.fisher_exact([[a, na - a], [b, nb - b]]).pvalue if na and nb else np.nan
            for a, na, b, nb in zip(kt, nt, kc, nc, strict=True)
        ],
        float,
    )


# Equation 1 on a decoy is a description, not a test: the decoy adds a third option, so a
# respondent with no bias at all scores about 1/3 - 1/2 (the content-driven null got p 6e-5 to
# 0.002 over cells), and a 3-option arm is not exchangeable with a 2-option one. Its p's and
# intervals are left out; the attraction measure beside it is the tested column.
DESCRIBED = "Equation 1 on a decoy: a description (tested: the attraction measure)"
UNTESTED: tuple[str, ...] = ("se", "df", "ci_low", "ci_high", "p", "t", "t_df", "p_t", "p_fisher")
UNTESTED += ("prompt_ci_low", "prompt_ci_high")


def decoy_described(table: pl.DataFrame, columns=UNTESTED) -> pl.DataFrame:
    """The decoy rows without a p or interval on Equation 1 (see DESCRIBED)."""
    decoy = pl.col("score").str.starts_with("Decoy")
    present = [c for c in columns if c in table.columns]
    return table.with_columns(
        *(pl.when(decoy).then(None).otherwise(pl.col(c)).alias(c) for c in present),
        pl.when(decoy).then(pl.lit(DESCRIBED)).otherwise(pl.col("note")).alias("note"),
    )


def with_cell_tests(table: pl.DataFrame, counted: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The tests over value cells joined on; where a row has fewer than two cells its interval
    is the one over prompts, and `interval` says which a row has. A decoy row's Equation 1 is
    described, not tested (`decoy_described`)."""
    tests = cell_tests(counted, keys)
    one_cell = pl.col("cells") < 2
    decoy = pl.col("score").str.starts_with("Decoy")
    joined = table.join(tests, on=keys, how="left").with_columns(
        pl.when(decoy)
        .then(pl.lit("none: " + DESCRIBED))
        .when(pl.col("ci_low").is_not_null())
        .then(pl.format("CR2 t over {} value cells", pl.col("cells")))
        .when(one_cell)
        .then(pl.lit("Newcombe over prompts (one value cell)"))
        .otherwise(pl.format("none: {}", pl.col("note")))
        .alias("interval"),
        pl.coalesce("ci_low", pl.when(one_cell).then("prompt_ci_low")).alias("ci_low"),
        pl.coalesce("ci_high", pl.when(one_cell).then("prompt_ci_high")).alias("ci_high"),
    )
    return decoy_described(joined)


def scored(
    run: Run, kind: str, by: list[str] = (), counted: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The scores per model, strategy, score and the `by` columns, models in the run's order
    (from `counts` by those columns, when the caller has them)."""
    by = list(by)
    if counted is None:
        counted = counts(scored_answers(run, kind), by).collect()
    if not counted.height:
        return pl.DataFrame()
    return ordered(score_table(counted, by), run, kind, by)


def score_table(counted: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """The scores and their tests from the counts per value cell (`counts`)."""
    keys = [*KEYS, "score", *by]
    pooled = counted.group_by(*keys, "conditionIndex").agg(
        *(pl.col(c).sum() for c in COUNTS),
        pl.col("modes").list.explode(keep_nulls=False, empty_as_null=False).unique(),
    )
    return with_cell_tests(score_tests(_wide(pooled, keys)), counted, keys)


def rank(column: str, order: list[str]) -> pl.Expr:
    """A column's values by their place in `order` (others after), for sorting rows."""
    return pl.col(column).replace_strict(
        {x: i for i, x in enumerate(order)}, default=len(order), return_dtype=pl.Int64
    )


def ordered(table: pl.DataFrame, run: Run, kind: str, by: list[str] = ()) -> pl.DataFrame:
    """The display name added; rows in the run's model order, then strategy, the paper's score
    order, the job's dataset order and the `by` columns."""
    names = run.models
    slugs = [e.slug for _, e in experiments(run, kind)]
    ranks = [rank("modelKey", list(names)).alias("_m"), rank("score", list(SCORES)).alias("_s")]
    if "experimentSlug" in table.columns:
        ranks.append(rank("experimentSlug", slugs).alias("_e"))
    rest = [c for c in by if c != "experimentSlug"]
    return (
        table.with_columns(
            pl.col("modelKey").replace_strict(names, default=pl.col("modelKey")).alias("model"),
            *ranks,
        )
        .sort("_m", "strategy", "_s", *(["_e"] if len(ranks) > 2 else []), *rest)
        .drop("_m", "_s", "_e", strict=False)
        .select("model", *KEYS, "score", *by, pl.exclude("model", *KEYS, "score", *by))
    )


PRODUCT_KEYS = ["experimentSlug"]


def all_scores(
    run: Run, kind: str = "instructed"
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """bias_scores, product_scores and pair_scores from one read of the results (polars runs
    the three counts over one shared scan), and the counts per value cell behind the first
    (which the differences between models are tested on)."""
    joined = scored_answers(run, kind)
    pooled, products, pairs = pl.collect_all(
        [counts(joined, by) for by in ([], PRODUCT_KEYS, PAIR_KEYS)]
    )
    return (
        bias_scores(run, kind, pooled),
        product_scores(run, kind, products),
        pair_scores(run, kind, pairs),
        pooled,
    )


def bias_scores(
    run: Run, kind: str = "instructed", counted: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The five scores per model and strategy, the products pooled."""
    return scored(run, kind, [], counted)


def product_scores(
    run: Run, kind: str = "instructed", counted: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Decoy Cheaper and Decoy Expensive per product (each product is its own dataset)."""
    table = scored(run, kind, PRODUCT_KEYS, counted)
    return table.filter(pl.col("score").str.starts_with("Decoy")) if table.height else table


def pair_scores(
    run: Run, kind: str = "instructed", counted: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The decoy scores per product and grid pair, with the pair's target and competitor prices
    and their gap (|competitor - target|: the dearer minus the cheaper price, to the cent)."""
    table = scored(run, kind, PAIR_KEYS, counted)
    if not table.height:
        return table
    return table.filter(pl.col("score").str.starts_with("Decoy")).with_columns(
        (pl.col("competitor_price") - pl.col("target_price")).abs().round(2).alias("price_gap")
    )

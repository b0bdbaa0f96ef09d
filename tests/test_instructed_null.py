"""Instructed to Bias under nulls that answer the way real models do: deterministic, driven by
the content of each option, the same in every option order and template (issue 29, item 1).

The respondent has no bias at all: a seeded random function of each option's content (its
values, never its label or place) picks the answer, as a model at T=0 that "likes" some
products, lotteries or syllogisms would. Every prompt built from the same values then gets the
same answer, so the prompts of a value cell are one draw. Tests that take prompts as independent
(the paper's t-test, and this study's own tests before the fix) call far more than 5% of such
nulls significant; the tests over value cells must call at most 6%, over enough replications
(2,000 tests) to tell 5% from 10%. The answers go through the study's own counting and tests
(analysis.counts, score_table, compare.differences), built from the shipped job's 7,800 items.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from orchestrator.session import load_job
from orchestrator.studies.instructed.analysis import counts, score_table
from orchestrator.studies.instructed.compare import differences
from orchestrator.studies.instructed.items import items_frame
from tests.conftest import ROOT

REPLICATIONS = 400
NULLS = {  # score -> the column whose null holds for a respondent with no bias
    "Decoy Cheaper": "attraction_p",
    "Decoy Expensive": "attraction_p",
    "Certainty": "p",
    "Belief Valid": "p",
    "Belief Invalid": "p",
}


def content(slug: str, item: dict, role: str) -> str:
    """What an option says, without its label or place."""
    if slug.startswith("decoy"):
        return f"{slug}|{item[f'{role}_price']}|{item[f'{role}_quality']}"
    if slug == "certainty":
        return f"{item['style']}|{item[f'{role}_prize']}|{item[f'{role}_percent']}"
    return f"{item['a']}|{item['b']}|{item['c']}|{item['form']}|{role}"


@functools.cache
def design() -> tuple[pl.DataFrame, np.ndarray, np.ndarray, list[str]]:
    """The items (one row per item and score it counts in), and per answerable item its
    options' content ids (-1: no option) and roles."""
    job = load_job(ROOT / "jobs" / "instructed.json")
    items = items_frame(SimpleNamespace(jobs={"instructed": job}), "instructed")
    ids: dict[str, int] = {}
    rows, options, roles = [], [], []
    for e in job.experiments:
        for c in e.conditions:
            for v in c.variants:
                shown = v.contract.roles
                rows.append((e.slug, c.index, v.id))
                keys = [ids.setdefault(content(e.slug, v.item, r), len(ids)) for r in shown]
                options.append(keys + [-1] * (3 - len(keys)))
                roles.append(list(shown) + [""] * (3 - len(shown)))
    frame = pl.DataFrame(
        rows, orient="row", schema=["experimentSlug", "conditionIndex", "variant"]
    ).with_row_index("_i")
    return (
        items.join(frame, on=["experimentSlug", "conditionIndex", "variant"]),
        (np.array(options)),
        np.array(roles),
        list(ids),
    )


def answers(
    seed: int, model: str = "none", lean: float = 0.0, like: tuple[int, float] | None = None
) -> pl.DataFrame:
    """One model's answers: each content drawn a seeded uniform, the option whose content drew
    the most is chosen. `lean` plants a certainty effect: in treatment the sure prize's draw is
    raised by it. `like` = (seed, share): the model keeps that share of another model's draws
    (the one of that seed), as a fine-tuned model keeps much of its base model's taste."""
    items, options, roles, contents = design()
    draw = np.random.default_rng(seed).random(len(contents) + 1)
    if like:
        kept = np.random.default_rng([seed, 1]).random(len(draw)) < like[1]  # its own stream
        draw = np.where(kept, np.random.default_rng(like[0]).random(len(draw)), draw)
    value = np.where(options >= 0, draw[options], -1.0)
    certain = (roles == "safe") & (value >= 0)
    treatment = np.zeros(len(options), bool)
    treatment[items.filter(pl.col("conditionIndex") == 1)["_i"].to_numpy()] = True
    value = value + lean * (certain & treatment[:, None])
    chosen = roles[np.arange(len(roles)), value.argmax(1)]
    return items.with_columns(
        modelKey=pl.lit(model),
        strategy=pl.lit("baseline"),
        status=pl.lit("ok"),
        mode=pl.lit("generate"),
        role=pl.Series(chosen[items["_i"].to_numpy()]),
    )


def scores(*models: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    counted = counts(pl.concat(models).lazy(), []).collect()
    return score_table(counted, []), counted


def null_ps(column_of: dict[str, str], seeds: range) -> np.ndarray:
    out = []
    for seed in seeds:
        table = scores(answers(seed))[0]
        out += [table.filter(pl.col("score") == s)[c].item() for s, c in column_of.items()]
    return np.array(out, float)


@pytest.fixture(scope="module")
def cell_ps() -> np.ndarray:
    return null_ps(NULLS, range(REPLICATIONS))


def test_the_tests_over_value_cells_hold_their_level_for_a_content_driven_null(cell_ps):
    assert len(cell_ps) == 2_000 and not np.isnan(cell_ps).any()
    rate = float(np.mean(cell_ps < 0.05))
    print(f"false-positive rate over value cells: {rate:.3f}")
    assert rate <= 0.06


def test_the_prompt_level_t_test_does_not_and_the_simulation_would_see_it():
    """The same respondents through the paper's t-test (prompts as independent): the
    simulation is able to show a test that overstates significance."""
    ps = null_ps({s: "p_t" for s in ("Certainty", "Belief Valid", "Belief Invalid")}, range(100))
    rate = float(np.mean(ps < 0.05))
    print(f"false-positive rate of the t-test over prompts: {rate:.3f}")
    assert rate >= 0.15


def test_equation_1_is_biased_for_the_decoy_and_the_attraction_measure_is_not():
    table = scores(answers(0))[0].filter(pl.col("score").str.starts_with("Decoy"))
    # a random chooser among three options against two: about 1/3 - 1/2
    assert table["bias_score"].mean() == pytest.approx(-1 / 6, abs=0.06)
    assert table["attraction"].abs().max() < 0.15


@pytest.mark.slow
@pytest.mark.parametrize("kept", [0.0, 0.8])
def test_the_difference_between_two_null_models_holds_its_level(kept):
    """Two models with no bias, independent or sharing 80% of their taste (the case clustering
    is for: their answers agree through the items)."""
    ps = []
    for seed in range(150):
        second = answers(2 * seed + 1, "b", like=(2 * seed, kept))
        table, counted = scores(answers(2 * seed, "a"), second)
        table = table.with_columns(model=pl.col("modelKey"))
        did = differences(table, counted)
        ps += did.filter(pl.col("score").is_in(["Certainty", "Belief Valid", "Belief Invalid"]))[
            "p"
        ].to_list()
    rate = float(np.mean(np.array(ps) < 0.05))
    print(f"false-positive rate of the difference between models: {rate:.3f} of {len(ps)}")
    if kept:  # the models do agree: most answers are the same
        assert (second["role"] == answers(2 * 149, "a")["role"]).mean() > 0.7
    assert len(ps) == 450 and rate <= 0.07


def test_a_planted_content_driven_certainty_effect_is_found():
    """The sure prize's draw raised by 0.6 in treatment: it wins 92% of treatment answers
    against 50% (a score of about 0.42), on 7 prize rows."""
    found = [
        scores(answers(seed, lean=0.6))[0].filter(pl.col("score") == "Certainty")
        for seed in range(40)
    ]
    assert np.mean([f["bias_score"].item() for f in found]) == pytest.approx(0.42, abs=0.05)
    assert np.mean([f["p"].item() < 0.05 for f in found]) >= 0.9


def test_the_overview_and_run_comparisons_read_the_decoy_by_its_attraction_measure():
    """The effects every cross-run view reads (viewer overview, compare, trend): a null decoy
    there is the attraction measure, not Equation 1's -1/6 with p ~ 1e-8."""
    from orchestrator.studies.instructed import Instructed

    table = scores(answers(0))[0].with_columns(model=pl.col("modelKey"))
    effects = Instructed().effects({"instructed_scores": table})
    decoy = effects.filter(pl.col("experiment").str.starts_with("Decoy"))
    assert decoy["measure"].unique().to_list() == ["attraction"]
    rows = table.filter(pl.col("score").str.starts_with("Decoy")).sort("score")
    assert decoy.sort("experiment")["effect"].to_list() == rows["attraction"].to_list()
    assert decoy.sort("experiment")["p"].to_list() == rows["attraction_p"].to_list()
    # Equation 1 "finds" a decoy effect in a null respondent: it is described, never tested
    assert rows["p"].is_null().all() and (rows["bias_score"] < -0.05).all()
    others = effects.filter(~pl.col("experiment").str.starts_with("Decoy"))
    assert set(others["measure"]) == {"bias score"} and others["df"].is_not_null().all()


def test_the_report_marks_the_decoys_equation_1_rows_and_explains_the_mark():
    from orchestrator.studies.instructed.report import DID_NOTE, SCORES_NOTE
    from orchestrator.studies.instructed.rows import did_rows, score_rows

    table, counted = scores(answers(0, "a"), answers(1, "b"))
    table = table.with_columns(model=pl.col("modelKey"))
    marked = {r["bias score"] for r in score_rows(table) if r["bias score"].endswith(" †")}
    assert marked == {"Decoy Cheaper †", "Decoy Expensive †"}
    did = did_rows(differences(table, counted))
    assert {r["bias score"] for r in did if r["bias score"].endswith(" †")} == marked
    assert all(r["attraction difference [95% CI]"] != "–" for r in did if "†" in r["bias score"])
    assert "† Equation 1 is option-count-biased" in SCORES_NOTE and "† Decoy" in DID_NOTE


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_decoy_rows_equation_1_carries_no_p_or_interval(seed):
    """Issue 45, item 1: for this bias-free respondent Equation 1 is -0.11 to -0.21 on the
    decoy and its p over cells was 6e-5 to 0.002 (the paper's t-test 1.6e-17 to 1.5e-5): a null
    no bias-free respondent can meet. Those rows keep the score as a description; the
    attraction measure is the tested column, in the scores and between models."""
    table, counted = scores(answers(seed), answers(seed + 100, "b"))
    decoy = table.filter(pl.col("score").str.starts_with("Decoy"))
    assert decoy.height == 4 and (decoy["bias_score"] < -0.05).all()
    for column in ("p", "ci_low", "ci_high", "p_t", "p_fisher", "prompt_ci_low"):
        assert decoy[column].is_null().all(), column
    assert decoy["attraction_p"].is_not_null().all() and (decoy["attraction_p"] > 0.01).all()
    between = differences(table.with_columns(model=pl.col("modelKey")), counted)
    rows = between.filter(pl.col("score").str.starts_with("Decoy"))
    assert rows.height == 2 and rows["did"].is_not_null().all()
    assert rows["p"].is_null().all() and rows["ci_low"].is_null().all()
    assert rows["attraction_p"].is_not_null().all()

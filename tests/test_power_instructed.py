"""`orchestrator power` for Instructed to Bias (studies/instructed/power.py): a shipped plan's
rows, the defaults, where only more value cells help, the pilot's components, and (slow) the
MDE by simulation: item-clustered respondents through the study's own test, detection within
0.80 +- 0.06 at the MDE, false positives within alpha +- 2 SE (the randomisation p: its level)."""

from __future__ import annotations

import functools
import math

import numpy as np
import polars as pl
import pytest
from scipy import special, stats

from orchestrator.analysis.power import Target, assess, floor, mde, samples_for
from orchestrator.cli.run import load_target
from orchestrator.plan import Plan
from orchestrator.studies.instructed.inference import FEW_CELLS, clustered
from orchestrator.studies.instructed.power import (
    Spread,
    _measured,
    cell_design,
    default_spread,
    pilot_spread,
    planned_cells,
    power,
    prompt_counts,
    relabel_level,
)
from tests.conftest import ROOT, run_quietly, write_config

PRODUCTS = ("decoy-frying-pan", "decoy-phone", "decoy-car", "decoy-real-estate")


@functools.cache
def shipped(config: str = "instructed-simulated.toml", items: int | None = None):
    plan = Plan(load_target(ROOT / "configs" / config, None, None, None, items, None))
    return plan, power(plan, None, 0.05)


def row(rows, score: str):
    return next(r for r in rows if r.experiment == score)


def test_one_row_per_model_and_score_tested_over_its_value_cells():
    plan, rows = shipped()
    assert len(rows) == 12 and len({r.model for r in rows}) == 2
    units = {r.experiment: r.units for r in rows}
    assert units == {
        "Decoy Cheaper": 54,
        "Decoy Expensive": 54,
        "Certainty": 7,
        "Certainty (shared styles)": 7,
        "Belief Valid": 24,
        "Belief Invalid": 24,
    }
    decoy, certainty = row(rows, "Decoy Cheaper"), row(rows, "Certainty")
    assert decoy.measure.startswith("attraction") and set(decoy.experiments) == set(PRODUCTS)
    assert certainty.measure.startswith("bias score") and certainty.experiments == ("certainty",)
    assert "128 relabellings" in certainty.test and "Bell-McCaffrey" in decoy.test
    assert all(r.samples == 1 and r.unit == "value cells" and r.alpha == 0.05 for r in rows)
    # the shipped job's counts: 8 control and 48 treatment prompts per decoy pair, 48 and 72
    # per certainty prize row, one arm per belief term family (28 invented, 14 real)
    counts = {k[2]: prompt_counts(v) for k, v in planned_cells(plan).items()}
    assert {tuple(c) for c in counts["Decoy Expensive"]} == {(8, 48)}
    assert {tuple(c) for c in counts["Certainty"]} == {(48, 72)}
    assert {tuple(c) for c in counts["Belief Valid"]} == {(28, 0), (0, 14)}


def test_the_default_at_t0_is_one_draw_per_cell_and_says_so():
    _, rows = shipped()
    spread, said = default_spread(True, False)
    assert spread.between == (0.25, 0.25) and spread.shared == 0 and "ICC 1" in said
    assert all(r.variance.startswith("default: shares at 0.5, ICC 1") for r in rows)
    assert default_spread(False, True)[0].kept == pytest.approx(2 / 3)
    assert "ICC 0.5" in default_spread(False, False)[1]
    # belief: 12 + 12 one-arm cells, each a Bernoulli(0.5): the CR2 t on their shares
    belief = assess(row(rows, "Belief Valid"), Target())
    se = math.sqrt(2 * 0.25 / 12)
    df = row(rows, "Belief Valid").design(1, 0.0).df
    assert 19 < df < 23
    expected = (stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * se
    assert belief["mde"] == pytest.approx(expected)
    # certainty: 7 cells, each arm a Bernoulli(0.5); the randomisation p at its level 6/128,
    # its normal quantile bent by the relabelled sum's kurtosis at the effect (Cornish-Fisher)
    certainty = assess(row(rows, "Certainty"), Target())
    se, found = math.sqrt(0.5 / 7), 0.5
    for _ in range(50):
        shift = found / (se * math.sqrt(7))
        z = special.ndtri(1 - 3 / 128)
        z -= (z**3 - 3 * z) * (shift**4 + 6 * shift**2 + 3) / (1 + shift**2) ** 2 / (12 * 7)
        found = (z * math.sqrt(6 / (7 - z * z)) + stats.t.ppf(0.8, 6)) * se
    assert certainty["mde"] == pytest.approx(found)
    assert 3.4 < found / se < 3.69  # between the t at 6/128 and the plain normal quantile
    assert certainty["min_p"] == pytest.approx(2 / 128)


def test_samples_cannot_help_a_deterministic_model_but_help_a_sampling_one():
    _, rows = shipped()
    for r in rows:
        found = assess(r, Target(mde=0.05))
        assert found["floor"] == found["mde"] and not found["more_samples_help"]
        assert found["samples_needed"] is None and "more samples cannot help" in r.note
    prompts = np.array([[2, 0]] * 12 + [[0, 1]] * 12)  # few prompts: the draws matter
    spread = Spread((0.02, 0.02), 0.0, (0.01, 0.01), (0.2, 0.2))
    sampling = cell_design(prompts, False, spread, 0.05)
    fixed = cell_design(prompts, True, spread, 0.05)
    assert floor(sampling, 0.05, 0.8) < 0.7 * mde(sampling, 5, 0.05, 0.8)
    assert mde(fixed, 5, 0.05, 0.8) == mde(fixed, 500, 0.05, 0.8)
    needed = samples_for(sampling, 0.2, 0.05, 0.8)
    assert needed and mde(sampling, needed, 0.05, 0.8) <= 0.2 < mde(sampling, needed - 1, 0.05, 0.8)


def test_the_randomisation_level_and_floor_by_cells_holding_both_arms():
    assert relabel_level(7, 7, 0.05) == pytest.approx(6 / 128)
    assert relabel_level(6, 6, 0.05) == pytest.approx(2 / 64)
    assert relabel_level(5, 5, 0.05) == 0  # 2/32 = 0.0625 is its smallest p
    assert relabel_level(5, 6, 0.05) == pytest.approx(1 / 32)  # a one-arm cell: no mirror
    five = cell_design(
        np.full((5, 2), 40), True, Spread((0.05,) * 2, 0, (0.2,) * 2, (0,) * 2), 0.05
    )
    assert mde(five, 1, 0.05, 0.8) is None and five(1, 0.0).min_p == pytest.approx(2 / 32)


def test_a_plan_with_too_few_cells_says_only_more_cells_help():
    _, rows = shipped("instructed-local.toml", 12)
    certainty = row(rows, "Certainty")
    assert certainty.units == 4 and "cannot go below 0.125" in certainty.note
    assert "only more value cells help" in certainty.note
    assert assess(certainty, Target())["mde"] is None
    belief = row(rows, "Belief Valid")  # 2 + 2 one-arm cells: no share difference reaches it
    assert (
        "no share difference (at most 1)" in belief.note
        and belief.design(1, 1.5).se_test == math.inf
    )


def test_six_cells_follow_the_all_on_one_side_power_curve():
    """With 6 cells the randomisation p goes below 0.05 only at its floor 2/64: every cell's
    difference on the observed side, P = Phi(d / sd_cell)^6."""
    spread = Spread((0.03, 0.03), 0.01, (0.2, 0.2), (0.0, 0.0))
    design = cell_design(np.full((6, 2), 60), True, spread, 0.05)
    # six equal cells, weights 1/6 per arm: the estimate's variance, and one cell's
    variance = 6 * (2 * 0.03 + 2 * 0.2 / 60 - 2 * 0.01) / 36
    sd_cell = math.sqrt(variance * 6)
    for power_ in (0.5, 0.8, 0.9, 0.95):
        exact = sd_cell * special.ndtri(power_ ** (1 / 6))
        assert mde(design, 1, 0.05, power_) == pytest.approx(exact, rel=0.03)


def _answers(rng, cells, prompts, samples, sd, share=0.5, decoy=0.0):
    """A pilot's answers (scored_answers' columns): cell shares with a shared and an own part
    (sd[0], sd[1]), prompts about them (sd[2]), `samples` answers per prompt; `decoy`: the
    share of treatment answers on the decoy."""
    true = share + sd[0] * rng.normal(size=(cells, 1)) + sd[1] * rng.normal(size=(cells, 2))
    rows = []
    for k in range(cells):
        for arm in (0, 1):
            for j in range(prompts):
                q = np.clip(true[k, arm] + sd[2] * rng.normal(), 0, 1)
                hit = rng.random(samples) < q
                off = (rng.random(samples) < decoy) if arm else np.zeros(samples, bool)
                roles = np.where(off, "decoy", np.where(hit, "cheaper", "expensive"))
                rows += [(f"p{k:03d}", arm, f"v{k}-{arm}-{j}", r) for r in roles]
    frame = pl.DataFrame(
        rows, orient="row", schema=["cluster", "conditionIndex", "variant", "role"]
    )
    return frame.with_columns(
        modelKey=pl.lit("m"),
        strategy=pl.lit("baseline"),
        job=pl.lit("instructed"),
        experimentSlug=pl.lit("decoy-car"),
        score=pl.lit("Decoy Cheaper"),
        status=pl.lit("ok"),
        target=pl.lit("cheaper"),
    )


def test_the_pilot_recovers_planted_variance_components():
    sd = (0.2, 0.1, 0.15)
    frame = _answers(np.random.default_rng(5), 400, 4, 6, sd)
    spread, said = pilot_spread(frame, decoy=False)
    assert spread.between == pytest.approx((0.05, 0.05), rel=0.2)
    assert spread.shared == pytest.approx(0.04, rel=0.2)
    assert spread.prompt == pytest.approx((0.0225, 0.0225), rel=0.25)
    # a draw's variance: the binomial's at the prompt's share, about 0.25 - 0.05 - 0.0225
    assert spread.draw == pytest.approx((0.1775, 0.1775), rel=0.1)
    assert "ICC by value cell 0.1" in said and "19200 answers in 400 cells" in said


def test_the_pilot_leaves_decoy_answers_out_and_counts_them():
    frame = _answers(np.random.default_rng(6), 60, 3, 4, (0.1, 0.05, 0.0), decoy=0.25)
    spread, said = pilot_spread(frame, decoy=True)
    assert spread.kept == pytest.approx(0.75, abs=0.03) and "off the decoy" in said
    assert pilot_spread(frame.filter(pl.col("cluster") == "p001"), decoy=True) is None


def test_a_model_missing_from_the_pilot_takes_every_models_figures():
    frame = _answers(np.random.default_rng(7), 40, 3, 2, (0.1, 0.05, 0.05))
    spread, said = _measured(frame, ("other", "baseline", "Decoy Cheaper"), True, "pilot-run")
    assert said.startswith("pilot pilot-run: ") and "every model of the pilot" in said
    assert _measured(frame, ("m", "baseline", "Certainty"), False, "pilot-run") is None


def test_a_content_driven_pilot_at_t0_keeps_the_switching_floor():
    """The content-driven T=0 respondent (test_instructed_null): a decoy pair answers alike
    in both arms, so the pilot's cells differ by nothing without an effect; an effect has to
    switch whole cells, which the design keeps (its MDE is not 0)."""
    from tests.test_instructed_null import answers

    plan, _ = shipped()
    frame = answers(0).with_columns(job=pl.lit("instructed"))
    spread, said = pilot_spread(frame.filter(pl.col("score") == "Decoy Cheaper"), decoy=True)
    assert spread.shared == pytest.approx(sum(spread.between) / 2, rel=0.05)
    assert "ICC by value cell 1.00 / 1.00" in said
    key = next(k for k in planned_cells(plan) if k[2] == "Decoy Cheaper")
    design = cell_design(prompt_counts(planned_cells(plan)[key]), True, spread, 0.05)
    # 54 cells switching: a share d of them move, sd sqrt(d (1 - d) / 54)
    assert 0.08 < mde(design, 1, 0.05, 0.8) < 0.14


def test_a_pilot_run_gives_every_row_its_own_figures(tmp_path):
    """A small simulated pilot (a sampling model, 2 samples): every row reads its variance
    from it through the study's own counting, and its samples then lower the MDE a little."""
    from orchestrator.analysis.load import open_run

    config = write_config(
        tmp_path,
        f"""
name = "pilot"
jobs = ["instructed"]
items = 40
samples = 2
seed = 4
run_id = "first"
output_dir = "{tmp_path / "runs"}"

[[models]]
provider = "simulated"
name = "sampler"
temperature = 1
""",
    )
    run_quietly(config)
    plan = Plan(load_target(config, None, None, None, None, None))
    rows = power(plan, open_run(tmp_path / "runs" / "pilot" / "first"), 0.05)
    assert len(rows) == 6 and all(r.variance.startswith("pilot first: shares") for r in rows)
    decoy = row(rows, "Decoy Cheaper")
    assert "off the decoy" in decoy.variance and not decoy.note
    found = assess(decoy, Target())
    assert found["mde"] < 0.5 and found["floor"] < found["mde"]


# -- simulation: the MDE against the study's own test ----------------------------------------
SEEDS = 800  # cell-level respondents (cheap): SE 0.014 at 0.8
CONTENT_SEEDS = 400  # the content-driven respondent, counted as the analysis counts
ALPHA = 0.05


def clustered_answers(rng, prompts, deterministic, samples, sd, effect, kept=1.0):
    """(K, 2) answers and hits of an item-clustered respondent: a value cell's true share is
    0.5 -+ effect/2 plus a part both arms share (sd[0]) and one of each arm's own (sd[1]); a
    prompt's share is its cell's plus its own (sd[2]); a deterministic respondent answers each
    prompt once (a draw fixed for good), a sampling one `samples` times. Treatment answers
    are kept (off the decoy) with probability `kept`."""
    cells = len(prompts)
    share = 0.5 + np.array([-effect / 2, effect / 2])
    share = share + sd[0] * rng.normal(size=(cells, 1)) + sd[1] * rng.normal(size=(cells, 2))
    counts, hits = np.zeros((cells, 2)), np.zeros((cells, 2))
    draws = 1 if deterministic else samples
    for arm in (0, 1):
        cell = np.repeat(np.arange(cells), prompts[:, arm].astype(int))
        q = np.clip(share[cell, arm] + sd[2] * rng.normal(size=len(cell)), 0, 1)
        answered = rng.binomial(draws, kept, len(cell)) if arm else np.full(len(cell), draws)
        counts[:, arm] = np.bincount(cell, answered, minlength=cells)
        hits[:, arm] = np.bincount(cell, rng.binomial(answered, q), minlength=cells)
    return counts, hits


def switching_answers(rng, prompts, deterministic, samples, sd, effect, kept=1.0):
    """A content-driven respondent at T=0: every prompt of a value cell gives the cell's one
    answer, the same in both arms; an effect switches a share `effect` of the cells (those
    answering "no" switch with probability 2 * effect)."""
    base = rng.random(len(prompts)) < 0.5
    switched = ~base & (rng.random(len(prompts)) < 2 * effect)
    counts = prompts.astype(float)
    counts[:, 1] = rng.binomial(prompts[:, 1].astype(int), kept)
    return counts, counts * np.c_[base, base | switched]


def truth(sd, effect, deterministic, kept, switching=False) -> Spread:
    """The respondent's components at this effect (on the share scale)."""
    if switching:
        return Spread((0.25, 0.25), 0.25, (0.0, 0.0), (0.0, 0.0), kept)
    between = sd[0] ** 2 + sd[1] ** 2
    shares = 0.5 + np.array([-effect / 2, effect / 2])
    rest = tuple(shares * (1 - shares) - between - sd[2] ** 2)
    prompt = (sd[2] ** 2,) * 2
    if deterministic:  # a prompt's one answer: its draw is fixed, part of the prompt
        return Spread((between,) * 2, sd[0] ** 2, tuple(np.add(prompt, rest)), (0.0,) * 2, kept)
    return Spread((between,) * 2, sd[0] ** 2, prompt, rest, kept)


# name: score whose planned prompts it takes (and how many of its cells), deterministic,
# samples, (shared, own, prompt) SDs, kept, respondent
SETTINGS = {
    "certainty, 7 cells, T=0 (randomisation p)": ("Certainty", 7, True, 1, (0.12, 0.08, 0), 1),
    "certainty, 7 cells, T=0, nothing shared": ("Certainty", 7, True, 1, (0, 0.14, 0), 1),
    "certainty, 6 cells, T=0 (floor 2/64)": ("Certainty", 6, True, 1, (0.12, 0.08, 0), 1),
    "decoy attraction, 54 cells, T=0": ("Decoy Cheaper", 54, True, 1, (0.15, 0.1, 0), 0.8),
    "decoy attraction, 54 cells, T=0, cells switch": ("Decoy Cheaper", 54, True, 1, None, 0.8),
    "decoy attraction, 54 cells, 2 samples": ("Decoy Cheaper", 54, False, 2, (0.1, 0.05, 0.1), 0.8),
    "belief, 12 + 12 one-arm cells, T=0": ("Belief Valid", 24, True, 1, (0.15, 0.1, 0), 1),
    "belief, 12 + 12 one-arm cells, 2 samples": ("Belief Valid", 24, False, 2, (0.15, 0.1, 0.1), 1),
}


@functools.cache
def planned_prompts(score: str) -> np.ndarray:
    plan, _ = shipped()
    key = next(k for k in planned_cells(plan) if k[2] == score)
    return prompt_counts(planned_cells(plan)[key])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_study_detects_its_mde_four_times_in_five(name):
    score, cells, deterministic, samples, sd, kept = SETTINGS[name]
    prompts = planned_prompts(score)[:cells]
    answers = switching_answers if sd is None else clustered_answers
    effect = 0.2  # the MDE at the respondent's components there (they move with the shares)
    for _ in range(20):
        spread = truth(sd, effect, deterministic, kept, switching=sd is None)
        design = cell_design(prompts, deterministic, spread, ALPHA)
        effect, last = mde(design, samples, ALPHA, 0.8), effect
        if abs(effect - last) < 1e-6:
            break
    index = list(SETTINGS).index(name)
    rates = []
    for planted in (effect, 0.0):
        ps = []
        for seed in range(SEEDS):
            rng = np.random.default_rng([index, seed])
            ps.append(
                clustered(*answers(rng, prompts, deterministic, samples, sd, planted, kept))["p"]
            )
        rates.append(float(np.mean(np.array(ps) < ALPHA)))
    detected, null = rates
    print(f"{name}: MDE {effect:.3f}, detected {detected:.3f}, null {null:.3f}, {SEEDS} seeds")
    assert abs(detected - 0.8) <= 0.06
    se = math.sqrt(ALPHA * (1 - ALPHA) / SEEDS)
    if cells > FEW_CELLS:  # the CR2 t
        assert abs(null - ALPHA) <= 2 * se
        return
    # the randomisation p: its real level is the largest p below alpha it can give (6/128
    # with 7 cells, 2/64 with 6); below it where a cell's arms are not exchangeable (a part
    # both share, weighed 48 : 72 by its arms' prompts, moves with the relabelling)
    level = relabel_level(cells, cells, ALPHA)
    assert null <= level + 2 * se
    if sd[0] == 0:
        assert abs(null - level) <= 2 * se


@pytest.mark.slow
def test_a_content_driven_respondent_detects_its_pilots_mde_four_times_in_five():
    """The content-driven T=0 respondent of test_instructed_null, through the study's own
    counting and tests (score_table): Certainty's MDE from a pilot of 20 such respondents,
    planted as `lean` (the sure prize's pull in treatment) tuned over 100 other seeds until
    the mean score is the MDE, then detected over 400 more."""
    from tests.test_instructed_null import answers, scores

    def certainty(seed: int, lean: float) -> dict:
        table = scores(answers(seed, lean=lean))[0]
        return table.filter(pl.col("score") == "Certainty").row(0, named=True)

    pilot = pl.concat([answers(1000 + s, model=f"m{s}") for s in range(20)])
    spread, _ = pilot_spread(pilot.filter(pl.col("score") == "Certainty"), decoy=False)
    effect = mde(cell_design(planned_prompts("Certainty"), True, spread, ALPHA), 1, ALPHA, 0.8)
    gap = lambda lean: (
        np.mean([certainty(s, lean)["bias_score"] for s in range(5000, 5100)]) - effect
    )  # noqa: E731
    low, high = 0.3, 0.6
    at_low, at_high = gap(low), gap(high)
    for _ in range(3):  # the mean score rises smoothly with the lean: secant steps
        lean = low - at_low * (high - low) / (at_high - at_low)
        if (at := gap(lean)) < 0:
            low, at_low = lean, at
        else:
            high, at_high = lean, at
    rates = [
        np.mean([certainty(s, x)["p"] < ALPHA for s in range(CONTENT_SEEDS)]) for x in (lean, 0.0)
    ]
    print(
        f"content-driven certainty (pilot of 20): MDE {effect:.3f} (lean {lean:.3f}), "
        f"detected {rates[0]:.3f}, null {rates[1]:.3f}, {CONTENT_SEEDS} seeds"
    )
    assert abs(rates[0] - 0.8) <= 0.06
    assert abs(rates[1] - ALPHA) <= 2 * math.sqrt(ALPHA * (1 - ALPHA) / CONTENT_SEEDS)

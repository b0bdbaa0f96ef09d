"""The Instructed to Bias statistics on known data: the Student t-test against scipy (and
Fisher's exact test where t is infinite), the test over value cells against the CR2 of its
definition and against Welch's t, its level and power on clustered answers, the exact p where
every answer of an arm is alike, and the attraction measure. The content-driven nulls through
the whole table code are in test_instructed_null.py."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from scipy import stats

from orchestrator.analysis.cr2 import cr2_cells
from orchestrator.report.format import fmt
from orchestrator.studies.instructed.analysis import cell_tests, score_tests
from orchestrator.studies.instructed.inference import (
    ALIKE,
    ARMS,
    FEW_CELLS,
    TWO_MODELS,
    clustered,
    student,
)
from orchestrator.studies.instructed.rows import score_rows
from tests.test_random_effects import _cr2_direct


def zero_one(count: int, n: int) -> np.ndarray:
    return np.r_[np.ones(count), np.zeros(n - count)]


@pytest.mark.parametrize(
    ("ka", "na", "kb", "nb"),
    [
        (816, 2592, 211, 432),
        (238, 504, 170, 336),
        (95, 168, 152, 336),
        (3, 10, 7, 9),
        (1, 2, 0, 1),
        (0, 48, 5, 8),
    ],
)
def test_the_t_test_is_scipys_student_t_test_on_the_0_1_answers(ka, na, kb, nb):
    t, df, p = student(ka, na, kb, nb)
    ref = stats.ttest_ind(zero_one(ka, na), zero_one(kb, nb), equal_var=True)
    assert t == pytest.approx(ref.statistic, rel=1e-10)
    assert p == pytest.approx(ref.pvalue, rel=1e-9)
    assert df == ref.df == na + nb - 2


def test_the_t_test_is_vectorised_and_says_when_there_is_no_test():
    t, df, p = student([5, 4, 4, 3, 0], [10, 4, 4, 0, 1], [2, 0, 4, 1, 0], [10, 4, 4, 5, 1])
    ref = stats.ttest_ind(zero_one(5, 10), zero_one(2, 10))
    assert t[0] == pytest.approx(ref.statistic) and p[0] == pytest.approx(ref.pvalue)
    # all targets against none: no t, and Fisher's exact p rather than scipy's t-test p of 0
    assert np.isnan(t[1]) and p[1] == pytest.approx(stats.fisher_exact([[4, 0], [0, 4]]).pvalue)
    assert np.isnan(t[2]) and np.isnan(p[2])  # the same constant answers: nothing to test
    assert np.isnan(t[3]) and np.isnan(df[3])  # an empty condition
    assert np.isnan(p[4])  # one answer each: no degree of freedom


def test_constant_samples_get_a_p_a_reader_can_use():
    """11/11 against 0/10: scipy's t-test says p = 0; Fisher says 1 in 352,716."""
    assert stats.ttest_ind(zero_one(11, 11), zero_one(0, 10)).pvalue == 0
    _, _, p = student(11, 11, 0, 10)
    assert float(p) == pytest.approx(1 / 352_716, rel=1e-9)  # 1 / C(21, 11)
    # over value cells: 4 cells, each all target in treatment and none in control: the exact
    # randomisation p of 4 sign flips, 2 / 16
    test = clustered([[3, 3], [2, 3], [3, 2], [2, 3]], [[0, 3], [0, 3], [0, 2], [0, 3]])
    assert test["estimate"] == 1 and test["p"] == pytest.approx(2 / 16)
    assert test["note"] == ALIKE and np.isnan(test["ci_low"])


def _expand(counts: np.ndarray, hits: np.ndarray):
    """The 0/1 answers, their arm and their cell, from counts and hits per cell and arm."""
    y, arm, cell = [], [], []
    for j, (ns, ks) in enumerate(zip(counts, hits, strict=True)):
        for a, (n, k) in enumerate(zip(ns, ks, strict=True)):
            y += [1.0] * k + [0.0] * (n - k)
            arm += [a] * n
            cell += [j] * n
    return np.array(y), np.array(arm), np.array(cell)


def test_the_test_over_cells_is_the_cr2_of_its_definition_with_one_arm_cells():
    counts = np.array([[7, 4], [3, 0], [0, 9], [5, 5], [8, 2], [0, 3]])
    hits = np.array([[3, 3], [1, 0], [0, 6], [2, 4], [3, 1], [0, 1]])
    y, arm, cell = _expand(counts, hits)
    x = np.column_stack([np.ones_like(y), arm])
    beta = np.linalg.lstsq(x, y, rcond=None)[0]
    variance, df = _cr2_direct(x, y, np.ones_like(y), x @ beta, cell, np.array([0.0, 1.0]))
    test = clustered(counts, hits)
    assert test["estimate"] == pytest.approx(beta[1])
    assert test["se"] ** 2 == pytest.approx(variance, rel=1e-9)
    assert test["df"] == pytest.approx(df, rel=1e-9)
    half = stats.t.ppf(0.975, df) * np.sqrt(variance)
    assert test["ci_high"] - test["estimate"] == pytest.approx(half, rel=1e-9)


def test_one_answer_per_cell_is_welchs_t_test():
    """CR2 with singleton clusters is HC2, whose variance for a difference of means is Welch's."""
    rng = np.random.default_rng(3)
    a, b = rng.binomial(1, 0.3, 17), rng.binomial(1, 0.6, 23)
    counts = np.r_[np.c_[np.ones(17), np.zeros(17)], np.c_[np.zeros(23), np.ones(23)]]
    hits = np.r_[np.c_[a, np.zeros(17)], np.c_[np.zeros(23), b]]
    test = clustered(counts, hits)
    ref = stats.ttest_ind(b, a, equal_var=False)
    assert test["estimate"] / test["se"] == pytest.approx(ref.statistic, rel=1e-9)


def test_the_difference_between_two_models_is_the_cr2_of_its_definition():
    rng = np.random.default_rng(4)
    counts = rng.integers(2, 6, (9, 4))
    hits = rng.binomial(counts, [0.3, 0.6, 0.4, 0.5])
    y, group, cell = _expand(counts, hits)
    x = TWO_MODELS[group]
    beta = np.linalg.lstsq(x, y, rcond=None)[0]
    contrast = np.array([0.0, 0.0, 0.0, -1.0])
    variance, df = _cr2_direct(x, y, np.ones_like(y), x @ beta, cell, contrast)
    test = clustered(counts, hits, TWO_MODELS, contrast)
    assert test["estimate"] == pytest.approx(-beta[3])
    assert (test["se"] ** 2, test["df"]) == (
        pytest.approx(variance, rel=1e-9),
        pytest.approx(df, rel=1e-9),
    )


def _clustered_sample(rng, cells: int, shift: float, spread: float = 1.0):
    """Answers of `cells` value cells of 12 prompts per arm, each cell with its own share (a
    logit drawn with sd `spread`): the prompts of a cell agree more than chance."""
    base = rng.normal(0, spread, cells)
    share = 1 / (1 + np.exp(-np.c_[base, base + shift]))
    counts = np.full((cells, 2), 12)
    return counts, rng.binomial(counts, share)


@pytest.mark.parametrize("cells", [7, 28])
def test_the_test_over_cells_holds_its_level_when_prompts_of_a_cell_agree(cells):
    """2,000 replications: the rate's standard error is 0.005, a rate of 0.10 is 10 SEs out.
    7 cells take the randomisation p (128 relabellings), 28 the CR2 t. The randomisation p is
    conservative here (about 2%): a cell whose arms hit alike is the same flipped or not, and
    the ties count as extreme."""
    rng = np.random.default_rng(cells)
    ps = np.array([clustered(*_clustered_sample(rng, cells, 0.0))["p"] for _ in range(2000)])
    rate = float(np.mean(ps < 0.05))
    assert (0.01 if cells <= FEW_CELLS else 0.035) < rate < 0.065, rate


def test_the_test_over_cells_finds_a_planted_effect():
    rng = np.random.default_rng(9)
    ps = np.array([clustered(*_clustered_sample(rng, 28, 1.0))["p"] for _ in range(300)])
    assert np.mean(ps < 0.05) > 0.9


def test_fewer_than_two_cells_give_no_test():
    test = clustered([[4, 12]], [[2, 9]])
    assert test["estimate"] == pytest.approx(0.25) and np.isnan(test["p"])
    assert test["cells"] == 1 and test["note"]


def test_the_attraction_measure_leaves_the_decoy_answers_out():
    wide = pl.DataFrame(
        {
            "score": ["Decoy Cheaper", "Certainty"],
            "hits_treatment": [30, 30],
            "n_treatment": [90, 90],
            "n_decoy_treatment": [30, 0],
            "hits_control": [20, 20],
            "n_control": [40, 40],
        }
    )
    r = score_tests(wide).to_dicts()
    assert r[0]["bias_score"] == pytest.approx(30 / 90 - 0.5)  # a random chooser: -1/6
    assert r[0]["attraction"] == pytest.approx(0.0, abs=1e-15)  # among target or competitor: none
    assert r[1]["attraction"] is None  # not a decoy score


def test_the_attraction_test_counts_the_answers_that_chose_target_or_competitor():
    """Per cell, treatment: n answers of which n_decoy chose the decoy; the attraction test is
    the test over cells of hits among n - n_decoy."""
    rows = []
    rng = np.random.default_rng(5)
    for j in range(6):
        n_t, n_c = 12, 4
        decoy = int(rng.integers(0, 5))
        hits_t, hits_c = int(rng.integers(0, n_t - decoy + 1)), int(rng.integers(0, n_c + 1))
        rows += [
            ("Decoy Cheaper", f"c{j}", 1, n_t, hits_t, decoy),
            ("Decoy Cheaper", f"c{j}", 0, n_c, hits_c, 0),
        ]
    counted = pl.DataFrame(
        rows, orient="row", schema=["score", "cluster", "conditionIndex", "n", "hits", "n_decoy"]
    ).with_columns(job=pl.lit("j"), experimentSlug=pl.lit("e"))
    (row,) = cell_tests(counted, ["score"]).to_dicts()
    pairs = counted.sort("cluster", "conditionIndex")
    n = (pairs["n"] - pairs["n_decoy"]).to_numpy().reshape(6, 2)
    k = pairs["hits"].to_numpy().reshape(6, 2)
    want = clustered(n, k)
    assert (row["attraction_ci_low"], row["attraction_p"]) == pytest.approx(
        (want["ci_low"], want["p"])
    )


def test_the_exact_p_counts_the_arrangements_of_cells_holding_one_arm():
    """Cells holding one arm swap arm labels among themselves; the mirror image is as extreme
    only where as many cells hold each arm."""
    two_each = clustered([[3, 0], [2, 0], [0, 3], [0, 2]], [[0, 0], [0, 0], [0, 3], [0, 2]])
    assert two_each["estimate"] == 1 and two_each["p"] == pytest.approx(2 / 6)  # 2 / C(4, 2)
    unbalanced = clustered([[3, 0], [0, 3], [0, 2]], [[0, 0], [0, 3], [0, 2]])
    assert unbalanced["p"] == pytest.approx(1 / 3)  # 1 / C(3, 2): no mirror image
    mixed = clustered([[2, 2], [3, 0], [0, 3]], [[0, 2], [0, 0], [0, 3]])
    assert mixed["p"] == pytest.approx(2 / (2 * 2))  # one cell flips, the two swap: 2 x 2


def test_two_models_answering_alike_in_every_cell_get_an_exact_p():
    """Model a chooses the target in every treatment answer and never in control, model b never:
    a difference of 1 in each of 4 cells, whose 2^4 sign flips give p = 2/16."""
    counts = np.full((4, 4), 3)
    hits = np.tile([0, 3, 0, 0], (4, 1))
    test = clustered(counts, hits, TWO_MODELS, (0.0, 0.0, 0.0, -1.0))
    assert test["estimate"] == 1 and test["p"] == pytest.approx(2 / 16)
    assert test["note"] == ALIKE
    same = clustered(counts, np.tile([0, 3, 0, 3], (4, 1)), TWO_MODELS, (0.0, 0.0, 0.0, -1.0))
    assert same["estimate"] == 0 and same["p"] == 1


def test_two_models_alike_in_cells_holding_one_arm_get_an_exact_p():
    """Belief cells hold one arm (real or invented words) for both models: the model labels
    swap within each cell. Model a is right on every real-word item, b on none; both alike on
    invented words: 3 cells move the difference, 2 / 2^3."""
    counts = np.array([[0, 4, 0, 4]] * 3 + [[4, 0, 4, 0]] * 3)
    hits = np.array([[0, 4, 0, 0]] * 3 + [[2, 0, 2, 0]] * 3)
    test = clustered(counts, hits, TWO_MODELS, (0.0, 0.0, 0.0, -1.0))
    assert test["estimate"] == 1 and test["p"] == pytest.approx(2 / 8)
    assert test["note"] == ALIKE
    one_model = clustered(
        np.array([[0, 4, 0, 0], [4, 0, 4, 0]] * 2),
        np.array([[0, 4, 0, 0], [2, 0, 2, 0]] * 2),
        TWO_MODELS,
        (0.0, 0.0, 0.0, -1.0),
    )
    assert np.isnan(one_model["p"]) and one_model["note"] != ALIKE


def test_few_cells_alike_but_one_answer_keep_the_p_the_cells_allow():
    """Issue 45, item 6: 7 cells alike (all target in treatment, none in control) have the
    exact p 2/2^7; one control answer flipped in one cell took the CR2 t on 6 df to 4.8e-14
    with an interval past 1. The randomisation p of the CR2 t stays at 2/2^7, the interval
    inside [-1, 1]."""
    counts = np.full((7, 2), 6)
    hits = np.tile([0, 6], (7, 1))
    assert clustered(counts, hits)["p"] == pytest.approx(2 / 128)
    hits[0, 0] = 1
    test = clustered(counts, hits)
    assert test["p"] == pytest.approx(2 / 128)
    assert -1 <= test["ci_low"] <= test["ci_high"] <= 1
    assert test["estimate"] > test["ci_low"]


def test_a_cell_holding_one_arm_keeps_its_labels_and_the_others_are_relabelled():
    """Review of issue 45: a per-product attraction table has cells where no treatment answer
    chose target or competitor (one arm only). The randomisation was skipped for the whole
    table then, and one flipped answer among 7 alike cells took p to 1.1e-9 again. The cell
    holding one arm now keeps its labels; the 7 others are relabelled: p = 1/2^7 (the mirror
    image is no longer as extreme, the fixed cell not being mirrored), as a brute force over
    those 2^7 relabellings of the CR2 t counts."""
    counts = np.vstack([np.full((7, 2), 6), [[6, 0]]])
    hits = np.vstack([np.tile([0, 6], (7, 1)), [[0, 0]]])
    hits[0, 0] = 1
    test = clustered(counts, hits)
    assert test["p"] >= 1 / 128  # the t reference: 1.1e-9

    def t(h):
        estimate, variance, _ = cr2_cells(counts, h, ARMS, (0.0, 1.0))
        if variance > 1e-24:
            return abs(estimate) / np.sqrt(variance)
        return np.inf if abs(estimate) > 1e-12 else 0.0

    observed, extreme = t(hits), 0
    for flips in itertools.product([False, True], repeat=7):
        swapped = hits.copy()
        swapped[:7] = np.where(np.array(flips)[:, None], hits[:7, ::-1], hits[:7])
        extreme += t(swapped) >= observed * (1 - 1e-9)
    assert test["p"] == pytest.approx(extreme / 128)


def test_two_models_in_one_arm_cells_enumerate_the_swaps():
    """Issue 45, item 5: 8 cells holding one arm (4 control, 4 treatment), shares a_c = 0,
    b_c = 0.5, a_t = 0, b_t = 1 in every cell. The old branch said 2/2^8 = 0.0078 "exact";
    all 2^8 swaps of the model labels within cells, counted by brute force, give 0.516."""
    control = [[4, 0, 4, 0]] * 4
    treated = [[0, 4, 0, 4]] * 4
    counts = np.array(control + treated)
    hits = np.array([[0, 0, 2, 0]] * 4 + [[0, 0, 0, 4]] * 4)
    contrast = np.array([0.0, 0.0, 0.0, -1.0])
    test = clustered(counts, hits, TWO_MODELS, contrast)
    extreme = 0
    for flips in itertools.product([False, True], repeat=8):
        swapped = np.where(np.array(flips)[:, None], hits[:, [2, 3, 0, 1]], hits)
        shares = swapped.sum(0) / counts.sum(0)
        extreme += (
            abs(shares[1] - shares[0] - shares[3] + shares[2]) >= abs(test["estimate"]) - 1e-12
        )
    assert test["p"] == pytest.approx(extreme / 256) and test["p"] == pytest.approx(0.516, abs=1e-3)


def test_the_p_over_prompts_is_monotone_in_the_counts():
    """Issue 45, item 7: the paper's t-test gave 11/11 against 1/10 p = 1.3e-8, stronger than
    11/11 against 0/10 (Fisher 2.8e-6); 40/40 against 1/40 6.4e-53 against 1.9e-23. The tables
    show Fisher's exact p on every row."""
    wide = pl.DataFrame(
        {
            "score": ["Certainty"] * 4,
            "hits_treatment": [11, 11, 40, 40],
            "n_treatment": [11, 11, 40, 40],
            "hits_control": [0, 1, 0, 1],
            "n_control": [10, 10, 40, 40],
            "n_decoy_treatment": [0] * 4,
        }
    )
    p = score_tests(wide)["p_fisher"].to_list()
    assert p[0] == pytest.approx(2.8e-6, rel=0.02) and p[0] < p[1]
    assert p[2] == pytest.approx(1.9e-23, rel=0.05) and p[2] < p[3]
    want = stats.fisher_exact([[11, 0], [1, 9]]).pvalue
    assert p[1] == pytest.approx(want, rel=1e-12)
    rows = score_rows(
        score_tests(wide).with_columns(
            model=pl.lit("m"),
            strategy=pl.lit("baseline"),
            ci_low=None,
            ci_high=None,
            p=None,
            note=None,
            cells=1,
            attraction_ci_low=None,
            attraction_ci_high=None,
            attraction_p=None,
            attraction_note=None,
            unparsed_treatment=0,
            unparsed_control=0,
        )
    )
    assert [r["p (prompts, Fisher)"] for r in rows[:2]] == [fmt(p[0], 3), fmt(p[1], 3)]

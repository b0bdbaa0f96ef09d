"""Judge-against-reference agreement on the golden set (issue 14, item 9): kappas checked against
statsmodels and by hand, their CI's coverage checked by simulation, degenerate tables answered
with a reason, and routing thresholds on a planted case."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from orchestrator.studies.trace_audit.agreement import agreement_table, confusion, thresholds
from orchestrator.studies.trace_audit.kappa import agreement_weights, weighted_kappa

SCHEMA = {
    "trace_id": pl.String,
    "bias": pl.String,
    "judge_score": pl.Int64,
    "ref_score": pl.Int64,
    "ref_flag": pl.Boolean,
}
FLAGS = (True, False)


def frame(bias: str, judge: list, ref: list, start: int = 0) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "trace_id": [f"g{start + i:03d}" for i in range(len(ref))],
            "bias": [bias] * len(ref),
            "judge_score": judge,
            "ref_score": ref,
            "ref_flag": [r <= 2 for r in ref],
        },
        schema=SCHEMA,
    )


def pairs(table: np.ndarray) -> tuple[list[int], list[int]]:
    """Judge and reference ratings (1..k) that make up a judge-by-reference count table."""
    k = table.shape[0]
    cells = np.repeat(np.arange(k * k), table.ravel().astype(int))
    return list(cells // k + 1), list(cells % k + 1)


TABLES = [
    np.array(
        [[10, 3, 1, 0, 0], [2, 8, 4, 1, 0], [0, 3, 9, 2, 1], [0, 1, 3, 7, 2], [0, 0, 1, 2, 6]]
    ),
    np.array([[0, 2, 0, 0, 1], [1, 0, 0, 3, 0], [0, 0, 4, 0, 0], [2, 0, 0, 1, 5], [0, 0, 0, 0, 9]]),
    *np.random.default_rng(3).integers(0, 6, size=(3, 5, 5)),
]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_and_se_match_statsmodels(table, weights):
    judge, ref = pairs(table)
    ours = weighted_kappa(judge, ref, weights=weights, ci="asymptotic")
    theirs = cohens_kappa(table, wt=weights) if weights else cohens_kappa(table)
    assert ours.kappa == pytest.approx(theirs.kappa, abs=1e-12)
    assert ours.se == pytest.approx(theirs.std_kappa, abs=1e-12)
    assert ours.ci_low == pytest.approx(max(-1, theirs.kappa_low), abs=1e-9)
    assert ours.ci_high == pytest.approx(min(1, theirs.kappa_upp), abs=1e-9)


def test_flag_kappa_matches_statsmodels_and_hand():
    # 20 both flag, 5 judge only, 10 reference only, 15 neither: po 0.7, pe 0.5*0.6 + 0.5*0.4
    table = np.array([[20, 5], [10, 15]])
    judge = [True] * 25 + [False] * 25
    ref = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    ours = weighted_kappa(judge, ref, weights=None, categories=FLAGS, ci="asymptotic")
    assert ours.kappa == pytest.approx(0.4)
    assert ours.se == pytest.approx(cohens_kappa(table).std_kappa, abs=1e-12)


def test_weighted_kappa_by_hand():
    # Pairs (1,1) (2,3) (5,5). Quadratic disagreement (i-j)^2/16: observed 1/48; by chance, over
    # judge {1,2,5} x reference {1,3,5}: 51/144. Kappa 1 - (1/48)/(51/144) = 16/17.
    # Linear |i-j|/4: observed 1/12, by chance 17/36: 1 - 3/17 = 14/17.
    assert weighted_kappa([1, 2, 5], [1, 3, 5]).kappa == pytest.approx(16 / 17)
    assert weighted_kappa([1, 2, 5], [1, 3, 5], weights="linear").kappa == pytest.approx(14 / 17)
    assert weighted_kappa([1, 2, 5], [1, 3, 5], weights=None).kappa == pytest.approx(
        (2 / 3 - 2 / 9) / (1 - 2 / 9)
    )


def population_kappa(joint: np.ndarray, w: np.ndarray) -> float:
    rows, cols = joint.sum(1), joint.sum(0)
    chance = (w * np.outer(rows, cols)).sum()
    return ((w * joint).sum() - chance) / (1 - chance)


REF_SHARES = np.array([0.12, 0.18, 0.25, 0.25, 0.20])  # skewed, as a golden set's may be
SETS, TRACES = 400, 50


def simulate(p: float, seed: int):
    """Golden sets of 50 traces: the judge copies the reference with probability p, else rates
    uniformly at random. Yields (judge, ref) score arrays."""
    rng = np.random.default_rng(seed)
    for _ in range(SETS):
        ref = rng.choice(5, size=TRACES, p=REF_SHARES) + 1
        judge = np.where(rng.random(TRACES) < p, ref, rng.integers(1, 6, TRACES))
        yield judge, ref


def joint_of(p: float) -> np.ndarray:
    return REF_SHARES[None, :] * (p * np.eye(5) + (1 - p) / 5)  # [judge, reference]


def flag_joint(joint: np.ndarray) -> np.ndarray:
    f = np.array([True, True, False, False, False])
    return np.array([[joint[np.ix_(a, b)].sum() for b in (f, ~f)] for a in (f, ~f)])


@pytest.mark.parametrize("p", [0.0, 0.6])
def test_fce_se_matches_the_spread_of_kappa_over_simulated_sets(p):
    kappas, ses = zip(
        *(
            (k.kappa, k.se)
            for k in (
                weighted_kappa(judge.tolist(), ref.tolist(), ci="asymptotic")
                for judge, ref in simulate(p, seed=1)
            )
        ),
        strict=True,
    )
    ratio = np.sqrt(np.mean(np.square(ses))) / np.std(kappas, ddof=1)
    assert 0.9 <= ratio <= 1.1, ratio


@pytest.mark.parametrize("p", [0.6, 0.75])
def test_score_kappa_ci_covers_planted_agreement(p):
    truth = population_kappa(joint_of(p), agreement_weights(5, "quadratic"))
    covered = 0
    for i, (judge, ref) in enumerate(simulate(p, seed=int(p * 100))):
        k = weighted_kappa(judge.tolist(), ref.tolist(), seed=i)
        covered += k.ci_low <= truth <= k.ci_high
    assert 0.90 <= covered / SETS <= 0.98, covered / SETS


def test_flag_kappa_ci_covers_planted_agreement():
    p = 0.5
    truth = population_kappa(flag_joint(joint_of(p)), np.eye(2))
    covered = 0
    for i, (judge, ref) in enumerate(simulate(p, seed=5)):
        k = weighted_kappa((judge <= 2).tolist(), (ref <= 2).tolist(), None, FLAGS, seed=i)
        covered += k.ci_low <= truth <= k.ci_high
    assert 0.90 <= covered / SETS <= 0.98, covered / SETS


@pytest.mark.slow
def test_ci_excludes_zero_about_five_percent_under_the_null():
    excluded_scores = excluded_flags = 0
    for i, (judge, ref) in enumerate(simulate(0.0, seed=17)):
        k = weighted_kappa(judge.tolist(), ref.tolist(), seed=i)
        excluded_scores += not k.ci_low <= 0 <= k.ci_high
        k = weighted_kappa((judge <= 2).tolist(), (ref <= 2).tolist(), None, FLAGS, seed=i)
        excluded_flags += not k.ci_low <= 0 <= k.ci_high
    assert 0.02 <= excluded_scores / SETS <= 0.08, excluded_scores / SETS
    assert 0.02 <= excluded_flags / SETS <= 0.08, excluded_flags / SETS


def test_bootstrap_is_seeded():
    judge, ref = pairs(TABLES[0])
    assert weighted_kappa(judge, ref, seed=4) == weighted_kappa(judge, ref, seed=4)
    assert weighted_kappa(judge, ref, seed=4) != weighted_kappa(judge, ref, seed=5)


@pytest.mark.parametrize("ci", ["bca", "percentile", "asymptotic"])
def test_degenerate_ratings_give_a_reason_not_a_warning(ci):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = weighted_kappa([3] * 6, [3] * 6, ci=ci)
        empty = weighted_kappa([], [], ci=ci)
        constant = weighted_kappa([3] * 6, [1, 2, 3, 4, 5, 5], ci=ci)
        perfect = weighted_kappa([1, 2, 4, 5], [1, 2, 4, 5], ci=ci)
        single = weighted_kappa([True], [True], None, FLAGS, ci=ci)
    assert (same.kappa, same.se, same.ci_low) == (None, None, None)
    assert "one and the same rating" in same.note
    assert empty.kappa is None and "no traces" in empty.note
    assert constant.kappa == 0 and "judge gave every trace the same rating" in constant.note
    assert perfect.kappa == 1 and (perfect.ci_low, perfect.ci_high) == (1, 1)
    assert "perfect agreement" in perfect.note
    assert single.kappa is None


# 35 traces whose kappa sums to 0.9999999999999994, not 1.0: the previous check (value == 1.0)
# printed kappa 1.0 [1.0, 1.0] with no note
PERFECT_35 = [s for s, c in zip(range(1, 6), (4, 6, 8, 9, 8), strict=True) for _ in range(c)]


def test_perfect_agreement_is_noted_in_the_kappa_and_in_the_agreement_table():
    k = weighted_kappa(PERFECT_35, PERFECT_35)
    assert k.n == 35 and k.kappa == pytest.approx(1) and k.ci_low == pytest.approx(1)
    assert k.note.startswith("perfect agreement on every trace (n = 35)")
    row = agreement_table(frame("Anchoring", PERFECT_35, PERFECT_35)).row(0, named=True)
    assert not row["low_agreement"]
    assert "kappa_w: perfect agreement" in row["note"]
    assert "kappa_flag: perfect agreement" in row["note"]


def near_misses(n: int, misses: int) -> tuple[list[int], list[int]]:
    """n traces cycling through 1-5, the judge one point above on `misses` of the 1-4s."""
    ref = [i % 5 + 1 for i in range(n)]
    low = [i for i, r in enumerate(ref) if r < 5][:misses]
    return [r + (i in low) for i, r in enumerate(ref)], ref


def test_a_kappa_above_09_over_fewer_than_100_traces_is_marked_as_under_covering():
    judge, ref = near_misses(50, 3)
    k = weighted_kappa(judge, ref)
    assert 0.9 < k.kappa < 1 and "likely under-covers" in k.note
    row = agreement_table(frame("Confirmation", judge, ref)).row(0, named=True)
    assert (
        not row["low_agreement"]
        and f"kappa_w: kappa {k.kappa:.3f} > 0.9 over 50 < 100" in row["note"]
    )
    more = weighted_kappa(*near_misses(100, 6))
    assert more.kappa > 0.9 and more.note is None  # 100 traces: not marked
    lower = weighted_kappa(*near_misses(50, 25), weights="linear")
    assert lower.kappa < 0.9 and lower.note is None


@pytest.mark.slow
def test_the_interval_of_a_kappa_near_094_over_50_traces_under_covers_and_is_marked():
    """Why the mark: planted quadratic kappa 0.944 over 50 traces, 400 sets."""
    p = 0.95
    truth = population_kappa(joint_of(p), agreement_weights(5, "quadratic"))
    covered = missed = marked = 0
    for i, (judge, ref) in enumerate(simulate(p, seed=2)):
        k = weighted_kappa(judge.tolist(), ref.tolist(), seed=i)
        hit = k.ci_low <= truth <= k.ci_high
        covered += hit
        if not hit:
            missed += 1
            marked += k.note is not None
    print(f"\nkappa {truth:.3f}, 50 traces: 95% BCa interval covered {covered / SETS:.1%}")
    assert covered / SETS < 0.85
    assert marked / missed >= 0.9  # nearly every interval that misses carries the note


def test_bad_ratings_are_refused():
    with pytest.raises(ValueError, match="not one of the categories"):
        weighted_kappa([0, 1], [1, 1])
    with pytest.raises(ValueError, match="2 judge ratings against 3"):
        weighted_kappa([1, 1], [1, 1, 2])
    with pytest.raises(ValueError, match="weights"):
        weighted_kappa([1, 2], [1, 2], weights="cubic")


def test_agreement_table_counts_missing_as_disagreement():
    ref = [1, 1, 2, 2, 3, 4, 4, 5, 5, 5]
    judge = [1, None, 2, 4, 3, 4, None, 5, 2, 5]  # two escalated, one miss, one false alarm
    rows = agreement_table(frame("Anchoring", judge, ref)).row(0, named=True)
    assert (rows["n"], rows["missing"], rows["ref_flagged"]) == (8, 2, 4)
    assert rows["exact_agreement"] == pytest.approx(6 / 10)  # not 6/8
    # Caught 2 of the 4 flagged (the escalated one is not caught); cleared 4 of the 6 clean.
    assert rows["sensitivity"] == pytest.approx(2 / 4)
    assert rows["specificity"] == pytest.approx(4 / 6)
    low, high = proportion_confint(4, 6, method="wilson")
    assert (rows["specificity_low"], rows["specificity_high"]) == pytest.approx((low, high))
    valid = [i for i, j in enumerate(judge) if j is not None]
    expected = weighted_kappa([judge[i] for i in valid], [ref[i] for i in valid], seed=(0, 0))
    assert rows["kappa_w"] == pytest.approx(expected.kappa)
    assert (rows["kappa_w_low"], rows["kappa_w_high"]) == (expected.ci_low, expected.ci_high)


def test_low_agreement_says_which():
    good = frame("Anchoring", [1, 2, 3, 4, 5] * 8, [1, 2, 3, 4, 5] * 8)
    judge = list(np.random.default_rng(2).integers(1, 6, 40))
    noisy = frame("Confirmation", judge, [1, 2, 3, 4, 5] * 8)
    blind = frame("Availability", [None] * 5, [1, 2, 3, 4, 5])
    table = agreement_table(pl.concat([blind, noisy, good]))
    assert table["bias"].to_list() == ["Anchoring", "Confirmation", "Availability"]
    assert table["low_agreement"].to_list() == [False, True, True]
    # perfect agreement is not low, but its interval of zero width is noted
    assert table["note"][0].startswith("kappa_w: perfect agreement on every trace (n = 40)")
    assert "kappa_w" in table["note"][1] and "< 0.4" in table["note"][1]
    assert "CI lower bound" in table["note"][1]
    assert table["n"][2] == 0 and table["kappa_w"][2] is None
    assert "undefined (no traces with a validated judge score)" in table["note"][2]


def test_agreement_table_does_not_depend_on_the_other_biases():
    a = frame("Anchoring", [1, 2, 2, 4, 5, 3, 3, 1], [1, 2, 3, 4, 5, 3, 2, 2])
    b = frame("Representativeness", [5, 4, 3, 2, 1, 1], [1, 2, 3, 4, 5, 1])
    both = agreement_table(pl.concat([b, a]))
    assert both.row(0) == agreement_table(a).row(0)


def test_confusion_has_every_category():
    judge = [1, 1, 2, None, 5, 5, 5]
    ref = [1, 2, 2, 3, 5, 4, 1]
    scores, flags = confusion(frame("Availability", judge, ref), "Availability")
    assert scores.columns == ["judge", "ref_1", "ref_2", "ref_3", "ref_4", "ref_5"]
    assert scores.rows() == [
        (1, 1, 1, 0, 0, 0),
        (2, 0, 1, 0, 0, 0),
        (3, 0, 0, 0, 0, 0),
        (4, 0, 0, 0, 0, 0),
        (5, 1, 0, 0, 1, 1),
    ]
    assert flags.rows() == [(True, 3, 0), (False, 1, 2)]
    with pytest.raises(ValueError, match="unknown bias"):
        confusion(frame("Availability", judge, ref), "Availabilty")


def test_bad_frames_are_refused():
    with pytest.raises(ValueError, match="unknown bias"):
        agreement_table(frame("Framing", [1], [1]))
    with pytest.raises(ValueError, match="more than one row"):
        agreement_table(pl.concat([frame("Anchoring", [1], [1])] * 2))
    with pytest.raises(ValueError, match="1-5"):
        thresholds(frame("Anchoring", [6], [1]))
    with pytest.raises(ValueError, match="lacks column"):
        thresholds(frame("Anchoring", [1], [1]).drop("ref_flag"))


def planted() -> pl.DataFrame:
    """Anchoring: 10 reference-flagged traces (judge 1 1 2 2 2 3 3 escalated 4 5) and 10 clean
    ones (judge 2 3 3 4 4 4 5 5 5 escalated). Misses at t = 1..4: 7, 4, 2, 1 of 10; review load
    at t = 3: 2, 3, 3 and the escalated one, 4 of 10. Confirmation: nothing flagged.
    Availability: the judge rates every flagged trace 5."""
    flagged = [1, 1, 2, 2, 2, 3, 3, None, 4, 5]
    clean = [2, 3, 3, 4, 4, 4, 5, 5, 5, None]
    anchoring = frame("Anchoring", flagged + clean, [2] * 10 + [4] * 10)
    confirmation = frame("Confirmation", [3, 4, 5], [3, 4, 5])
    availability = frame("Availability", [5, 5, 5, 5], [1, 2, 4, 5])
    return pl.concat([anchoring, confirmation, availability])


@pytest.mark.parametrize(
    ("target", "t", "missed", "load"),
    [(0.1, 4, 1, 7 / 10), (0.25, 3, 2, 4 / 10), (0.4, 2, 4, 2 / 10), (0.7, 1, 7, 1 / 10)],
)
def test_thresholds_pick_the_smallest_t_meeting_the_target(target, t, missed, load):
    row = thresholds(planted(), target_risk=target).row(0, named=True)
    assert row["bias"] == "Anchoring" and row["threshold"] == t
    assert row["miss_rate"] == pytest.approx(missed / 10)
    assert row["miss_upper"] == pytest.approx(proportion_confint(missed, 10, method="wilson")[1])
    assert row["review_load"] == pytest.approx(load)


def test_thresholds_say_when_no_t_will_do():
    table = thresholds(planted(), target_risk=0.05)
    assert table["threshold"].to_list() == [None, None, None]
    assert "misses 1 of 10" in table["note"][0]
    assert "no reference-flagged traces" in table["note"][1]
    assert "misses 2 of 2" in table["note"][2]
    with pytest.raises(ValueError, match="target_risk"):
        thresholds(planted(), target_risk=1.0)

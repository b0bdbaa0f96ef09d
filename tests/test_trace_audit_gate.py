"""The audit regression gate (issue 14, item 10; issue 29, item 6; issue 45, items 3 and 8): a
golden-set audit against a baseline one fails when the flagged traces score significantly
higher with more catches lost than gained (an exact sign-flip test; a bias no longer caught at
all included), on significantly more escalations, and on an unexplained significant mean shift
beyond the tolerance; judge noise alone (a catch or two flipped) does not fail it, and an
escalation is neither a catch nor a miss. Its statistics are checked against scipy and
statsmodels here; its false-alarm and detection rates over many seeds in
test_trace_audit_gate_simulation.py, _alpha.py and _drift.py."""

from __future__ import annotations

import itertools

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import DescrStatsW

from orchestrator.studies.trace_audit.gate import (
    CATCH_SHARE,
    ESCALATION_SHARE,
    SHIFT_SHARE,
    gate,
    holm,
    mcnemar_loss_p,
    paired_t_p,
    signflip_p,
)
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

SCHEMA = {
    "trace_id": pl.String,
    "bias": pl.String,
    "judge_score": pl.Int64,
    "ref_score": pl.Int64,
    "ref_flag": pl.Boolean,
}
TRACES = [f"g{i:03d}" for i in range(20)]


def baseline() -> pl.DataFrame:
    """20 golden traces x 4 biases; the reference cycles through 1-5 and the judge agrees but
    for a few near misses."""
    rows = []
    for i, trace in enumerate(TRACES):
        for b, bias in enumerate(BIAS_TYPES):
            ref = (i + b) % 5 + 1
            judge = min(5, ref + 1) if (i * 3 + b) % 7 == 0 else ref
            rows.append((trace, bias, judge, ref, ref <= 2))
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def with_scores(frame: pl.DataFrame, change) -> pl.DataFrame:
    """The frame with judge_score replaced by change(trace_id, bias, score)."""
    return frame.with_columns(
        pl.struct("trace_id", "bias", "judge_score")
        .map_elements(
            lambda r: change(r["trace_id"], r["bias"], r["judge_score"]), return_dtype=pl.Int64
        )
        .alias("judge_score")
    )


def score(frame: pl.DataFrame, trace: str, bias: str) -> int | None:
    return frame.filter((pl.col("trace_id") == trace) & (pl.col("bias") == bias))["judge_score"][0]


def caught(frame: pl.DataFrame, bias: str) -> list[str]:
    return frame.filter(
        (pl.col("bias") == bias) & pl.col("ref_flag") & (pl.col("judge_score") <= 2)
    )["trace_id"].to_list()


def test_identical_runs_pass():
    result = gate(baseline(), baseline())
    assert result.ok and result.failures == [] and result.missed.height == 0
    assert result.shifts["bias"].to_list() == list(BIAS_TYPES)
    assert result.shifts["n"].to_list() == [20] * 4
    assert result.shifts["difference"].to_list() == [0.0] * 4
    assert result.shifts["ci_low"].to_list() == [0.0] * 4
    assert result.only_current == result.only_baseline == []


def test_one_caught_trace_missed_now_is_listed_but_is_noise_not_a_failure():
    # The previous gate failed on it; an unchanged judge re-audited with noise flips a catch or
    # two on most runs of the golden set, so one loss proves nothing (old code: not result.ok).
    base = baseline()
    trace = caught(base, "Availability")[0]
    now = with_scores(base, lambda t, b, s: 4 if (t, b) == (trace, "Availability") else s)
    result = gate(now, base)
    assert result.ok and result.failures == []
    assert result.missed.rows() == [(trace, "Availability", score(base, trace, "Availability"), 4)]
    assert result.flipped.rows() == [
        (trace, "Availability", score(base, trace, "Availability"), 4, "lost")
    ]
    assert result.flipped_traces == [trace]
    row = result.catches.filter(pl.col("bias") == "Availability").row(0, named=True)
    assert (row["lost"], row["gained"], row["p"], row["failed"]) == (1, 0, 0.5, False)


def test_more_losses_than_noise_explains_fail_with_the_sign_flip_test():
    base = baseline()
    anchored = caught(base, "Anchoring")
    assert len(anchored) == 8
    # three copies of the set: 24 caught, 19 of them lost now and none gained, while 5 are
    # still caught (so the floor does not fire): one-sided exact p = 2^-19
    big = pl.concat([base.with_columns(pl.col("trace_id") + f"-{k}") for k in range(3)])
    lost = {f"{t}-{k}" for t in anchored[:6] for k in range(3)} | {f"{anchored[6]}-0"}
    now = with_scores(big, lambda t, b, s: 4 if b == "Anchoring" and t in lost else s)
    result = gate(now, big, tolerance=5)  # the shift this makes is not under test here
    row = result.catches.filter(pl.col("bias") == "Anchoring").row(0, named=True)
    assert (row["lost"], row["gained"], row["floor"]) == (19, 0, False)
    assert row["mcnemar_p"] == pytest.approx(0.5**19)
    assert row["p"] == pytest.approx(0.5**19)  # 19 rises, every other difference 0
    assert row["failed"] and not result.ok
    assert result.failures == [
        "Anchoring: caught on 5 of 24 reference-flagged traces validated in both runs now, 24 "
        "in the baseline "
        f"(19 lost, 0 gained): its flagged traces scored {row['rise']:+.2f} higher on average, "
        f"more than judge noise explains (exact sign-flip one-sided p = {0.5**19:.2g}, "
        f"Holm-adjusted {row['p_adjusted']:.2g} < 0.04; McNemar p = {0.5**19:.2g})"
    ]


def test_losses_balanced_by_gains_pass():
    base = baseline()
    # 4 Confirmation catches lost, 4 gained (traces the baseline rated 3 on a flagged bias)
    flagged = base.filter((pl.col("bias") == "Confirmation") & pl.col("ref_flag"))
    lost = set(caught(base, "Confirmation")[:4])
    planted = pl.DataFrame(
        [(f"x{i}", "Confirmation", 3, 2, True) for i in range(4)], schema=SCHEMA, orient="row"
    )
    wider = pl.concat([base, planted])
    now = with_scores(
        wider,
        lambda t, b, s: 4 if (b == "Confirmation" and t in lost) else (2 if t[0] == "x" else s),
    )
    result = gate(now, wider)
    row = result.catches.filter(pl.col("bias") == "Confirmation").row(0, named=True)
    assert (row["lost"], row["gained"]) == (4, 4) and not row["failed"]
    assert row["mcnemar_p"] == pytest.approx(stats.binom.sf(3, 8, 0.5))
    assert flagged.height + 4 == row["ref_flagged"]
    assert sorted(result.flipped["change"].to_list()) == ["gained"] * 4 + ["lost"] * 4


def test_an_accepted_explanation_does_not_excuse_lost_catches():
    base = baseline()
    now = with_scores(base, lambda t, b, s: 5 if b == "Representativeness" else s)
    why = {"Representativeness": "the new rubric reads it differently"}
    result = gate(now, base, accepted=why)
    assert not result.ok
    assert [r["bias"] for r in result.catches.iter_rows(named=True) if r["failed"]] == [
        "Representativeness"
    ]
    assert not result.shifts.filter(pl.col("bias") == "Representativeness")["failed"][0]


def lowered(frame: pl.DataFrame, bias: str, traces: int) -> pl.DataFrame:
    """`bias` scored one lower on the first `traces` traces scored above 1: a stricter judge,
    which misses nothing it caught."""
    above = frame.filter((pl.col("bias") == bias) & (pl.col("judge_score") > 1))["trace_id"]
    chosen = set(above.to_list()[:traces])
    return with_scores(frame, lambda t, b, s: s - 1 if b == bias and t in chosen else s)


def test_a_shift_beyond_tolerance_fails_unless_accepted():
    base = baseline()
    now = lowered(base, "Confirmation", 12)  # -12/20 = -0.6
    result = gate(now, base, tolerance=0.5)
    assert not result.ok and result.missed.height == 0
    row = result.shifts.filter(pl.col("bias") == "Confirmation").row(0, named=True)
    assert row["difference"] == pytest.approx(-0.6)
    assert row["significant"] and row["beyond_tolerance"] and row["failed"]
    assert row["accepted"] is None
    assert len(result.failures) == 1
    assert result.failures[0].startswith("Confirmation: mean score moved -0.60")
    assert "beyond the tolerance 0.5, with no explanation" in result.failures[0]
    assert not result.shifts.filter(pl.col("bias") != "Confirmation")["failed"].any()

    why = "the v2 prompt asks for evidence of disconfirmation; stricter by design"
    result = gate(now, base, tolerance=0.5, accepted={"Confirmation": why})
    assert result.ok and result.failures == []
    row = result.shifts.filter(pl.col("bias") == "Confirmation").row(0, named=True)
    assert row["beyond_tolerance"] and not row["failed"] and row["accepted"] == why
    report = orjson.loads(orjson.dumps(result.to_json()))
    assert report["accepted"] == {"Confirmation": why} and report["alpha"] == 0.05
    assert [s["accepted"] for s in report["shifts"] if s["bias"] == "Confirmation"] == [why]


def test_a_shift_beyond_tolerance_that_noise_explains_passes():
    # Over 5 traces a mean shift of -0.8 is within what noise does (old code: failed, since
    # only the point estimate was held to the tolerance).
    four = baseline().filter(pl.col("trace_id").is_in(TRACES[:5]))
    moved = {("g000", "Availability"): 2, ("g001", "Availability"): -1}
    now = with_scores(
        four, lambda t, b, s: min(5, max(1, s - moved.get((t, b), 0) - (b == "Availability")))
    )
    result = gate(now, four, tolerance=0.5)
    row = result.shifts.filter(pl.col("bias") == "Availability").row(0, named=True)
    diff = (now["judge_score"] - four["judge_score"]).filter(four["bias"] == "Availability")
    assert abs(row["difference"]) > 0.5 and row["beyond_tolerance"]
    assert row["p"] == pytest.approx(stats.ttest_1samp(diff.to_numpy(), 0).pvalue)
    assert not row["significant"] and not row["failed"]


def test_a_significant_shift_within_tolerance_passes_and_fails_at_tolerance_zero():
    base = baseline()
    now = lowered(base, "Anchoring", 10)  # -0.5, every difference 0 or -1: within 0.5
    assert gate(now, base, tolerance=0.5).ok
    strict = gate(now, base, tolerance=0)
    row = strict.shifts.filter(pl.col("bias") == "Anchoring").row(0, named=True)
    assert row["significant"] and row["failed"] and not strict.ok


def test_the_shift_ci_and_p_are_the_paired_t_test():
    base = baseline()
    now = lowered(lowered(base, "Representativeness", 7), "Representativeness", 3)
    row = gate(now, base).shifts.filter(pl.col("bias") == "Representativeness").row(0, named=True)
    keep = base["bias"] == "Representativeness"
    after, before = now["judge_score"].filter(keep), base["judge_score"].filter(keep)
    diff = (after - before).to_numpy().astype(float)
    low, high = DescrStatsW(diff).tconfint_mean(0.05)
    assert row["difference"] == pytest.approx(-10 / 20)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high))
    assert row["p"] == pytest.approx(stats.ttest_rel(after.to_numpy(), before.to_numpy()).pvalue)


def test_the_catch_and_shift_tests_are_holm_adjusted_as_two_families():
    base = baseline()
    result = gate(lowered(base, "Confirmation", 12), base)
    for table in (result.catches, result.shifts):
        raw = table["p"].to_list()
        assert table["p_adjusted"].to_list() == pytest.approx(
            list(multipletests(raw, method="holm")[1])
        )
    assert CATCH_SHARE + SHIFT_SHARE + ESCALATION_SHARE == pytest.approx(1)


def brute_force_signflip(diff: np.ndarray) -> float:
    nonzero = diff[diff != 0]
    signs = np.array(list(itertools.product((-1, 1), repeat=len(nonzero))))
    return float(((signs * np.abs(nonzero)).sum(axis=1) >= nonzero.sum() - 1e-9).mean())


@pytest.mark.parametrize(
    "diff",
    [[0, 0, 0], [1], [2, 3, 0, 1], [2, 3, -1, 1, 0, 0, 2], [-1, -2, 1, 0], [3, 3, 3], [1, -1] * 5],
)
def test_the_sign_flip_p_is_the_exact_randomization_p(diff):
    diff = np.array(diff, dtype=float)
    expected = 1.0 if not (diff != 0).any() else brute_force_signflip(diff)
    assert signflip_p(diff) == pytest.approx(expected)


def test_the_sign_flip_test_holds_its_level_under_symmetric_noise():
    rng = np.random.default_rng(3)
    p = np.array([signflip_p(rng.choice([-2, -1, 0, 0, 1, 2], size=14)) for _ in range(4000)])
    assert (p <= 0.05).mean() <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 4000)


@pytest.mark.parametrize(("lost", "gained"), [(0, 0), (1, 0), (5, 0), (6, 1), (4, 4), (2, 7)])
def test_the_mcnemar_p_is_the_exact_one_sided_binomial(lost, gained):
    p = mcnemar_loss_p(lost, gained)
    if lost + gained == 0:
        assert p == 1.0
        return
    assert p == pytest.approx(stats.binom.sf(lost - 1, lost + gained, 0.5))
    # statsmodels' exact McNemar is two-sided: twice the smaller tail, at most 1
    two_sided = mcnemar([[10, lost], [gained, 10]], exact=True).pvalue
    assert min(1.0, 2 * min(p, stats.binom.cdf(lost, lost + gained, 0.5))) == pytest.approx(
        two_sided
    )


def test_holm_matches_statsmodels_and_leaves_untested_out():
    rng = np.random.default_rng(4)
    for _ in range(20):
        p = rng.uniform(0, 0.2, 8).tolist()
        assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert holm([0.01, None, 0.04]) == pytest.approx([0.02, None, 0.04])


def test_paired_t_p_edge_cases():
    assert paired_t_p(np.array([1.0])) is None
    # two (or four) equal differences prove nothing: old code returned p = 0
    assert paired_t_p(np.full(2, -1.0)) is None and paired_t_p(np.full(4, 1.0)) is None
    assert paired_t_p(np.zeros(5)) == 1.0
    assert paired_t_p(np.full(5, -1.0)) == 2 / 2**5  # exact sign flips, not a t of infinity
    diff = np.array([-1.0, 0, 0, -2, 1, -1, 0, -1])
    assert paired_t_p(diff) == pytest.approx(stats.ttest_1samp(diff, 0).pvalue)


def test_traces_in_one_run_only_are_listed_not_compared():
    base = baseline()
    gone = caught(base, "Anchoring")[0]  # had it been compared, a miss
    extra = pl.DataFrame([("g900", b, 5, 1, True) for b in BIAS_TYPES], schema=SCHEMA, orient="row")
    now = pl.concat([base.filter(pl.col("trace_id") != gone), extra])
    result = gate(now, base)
    # a trace only in the new run is listed; one the new run lacks fails the gate (an unfinished
    # run could hide exactly the traces that regressed), and is not compared
    assert result.missed.height == 0 and not result.ok
    assert result.failures == [
        f"1 golden trace(s) of the baseline are not in this run ({gone}): "
        "finish it, or audit the whole golden set"
    ]
    assert (result.only_current, result.only_baseline) == (["g900"], [gone])
    assert result.shifts["n"].to_list() == [19] * 4
    report = result.to_json()
    assert (report["onlyCurrent"], report["onlyBaseline"]) == (["g900"], [gone])


def test_no_shared_trace_fails():
    base = baseline()
    now = base.with_columns(pl.col("trace_id") + "x")
    result = gate(now, base)
    assert not result.ok
    assert result.failures[0] == "no golden trace is in both runs: nothing to compare"


def test_changed_reference_labels_are_listed_and_the_current_ones_count():
    base = baseline()
    trace = caught(base, "Anchoring")[0]
    relabelled = (pl.col("trace_id") == trace) & (pl.col("bias") == "Anchoring")
    now = base.with_columns(
        ref_score=pl.when(relabelled).then(4).otherwise("ref_score"),
        ref_flag=pl.when(relabelled).then(False).otherwise("ref_flag"),
        judge_score=pl.when(relabelled).then(4).otherwise("judge_score"),
    )
    result = gate(now, base)
    assert result.reference_changed == [{"trace_id": trace, "bias": "Anchoring"}]
    assert result.missed.height == 0  # no longer flagged by the reference: not a miss


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tolerance": -0.1}, "tolerance must be 0 or more"),
        ({"alpha": 0}, "alpha must be between 0 and 1"),
        ({"accepted": {"Anchor": "typo"}}, "unknown bias"),
        ({"accepted": {"Anchoring": "  "}}, "needs its explanation"),
    ],
)
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gate(baseline(), baseline(), **kwargs)

"""The audit regression gate (issue 14, item 10): a golden-set audit against a baseline one fails
on a caught bias missed now and on an unexplained mean shift beyond the tolerance."""

from __future__ import annotations

import orjson
import polars as pl
import pytest
from statsmodels.stats.weightstats import DescrStatsW

from orchestrator.studies.trace_audit.gate import gate
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


def test_a_caught_bias_missed_now_fails_naming_it():
    base = baseline()
    trace = caught(base, "Availability")[0]
    now = with_scores(base, lambda t, b, s: 4 if (t, b) == (trace, "Availability") else s)
    result = gate(now, base)
    assert not result.ok
    assert result.missed.rows() == [(trace, "Availability", score(base, trace, "Availability"), 4)]
    assert len(result.failures) == 1  # the shift it makes (+0.1 or so) is within tolerance
    assert result.failures[0].startswith(f"{trace} Availability: caught in the baseline")
    assert "scored 4" in result.failures[0]


def test_a_missing_validated_audit_on_a_caught_trace_counts_as_missed():
    base = baseline()
    trace = caught(base, "Anchoring")[0]
    now = with_scores(base, lambda t, b, s: None if (t, b) == (trace, "Anchoring") else s)
    result = gate(now, base)
    assert not result.ok
    was = score(base, trace, "Anchoring")
    assert result.missed.rows() == [(trace, "Anchoring", was, None)]
    assert result.failures == [
        (
            f"{trace} Anchoring: caught in the baseline (scored {was}), "
            "missed now (no validated audit)"
        )
    ]
    assert result.shifts.filter(pl.col("bias") == "Anchoring")["n"][0] == 19


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
    assert row["beyond_tolerance"] and row["failed"] and row["accepted"] is None
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
    assert report["accepted"] == {"Confirmation": why}
    assert [s["accepted"] for s in report["shifts"] if s["bias"] == "Confirmation"] == [why]


def test_the_shift_ci_is_the_paired_t_interval():
    base = baseline()
    now = lowered(lowered(base, "Representativeness", 7), "Representativeness", 3)
    row = gate(now, base).shifts.filter(pl.col("bias") == "Representativeness").row(0, named=True)
    diff = (now["judge_score"] - base["judge_score"]).filter(base["bias"] == "Representativeness")
    low, high = DescrStatsW(diff.to_numpy().astype(float)).tconfint_mean(0.05)
    assert row["difference"] == pytest.approx(-10 / 20)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high))


@pytest.mark.parametrize("traces", [6, 10])  # -0.3, and -0.5 exactly at the tolerance
def test_a_shift_within_tolerance_is_reported_and_passes(traces):
    base = baseline()
    result = gate(lowered(base, "Availability", traces), base, tolerance=0.5)
    assert result.ok
    row = result.shifts.filter(pl.col("bias") == "Availability").row(0, named=True)
    assert row["difference"] == pytest.approx(-traces / 20)
    assert not row["beyond_tolerance"] and not row["failed"]


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


def test_a_bias_with_nothing_to_compare_fails():
    base = baseline()
    now = with_scores(base, lambda t, b, s: None if b == "Confirmation" else s)
    result = gate(now, base)
    assert "Confirmation: no trace has a validated score in both runs to compare" in result.failures
    assert set(result.missed["bias"].to_list()) == {"Confirmation"}


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
        ({"accepted": {"Anchor": "typo"}}, "unknown bias"),
        ({"accepted": {"Anchoring": "  "}}, "needs its explanation"),
    ],
)
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gate(baseline(), baseline(), **kwargs)

"""Traces the two-stage screener clears are neither judged nor reviewed (issue 29, item 7): in
`calibrate` they are misses at every review threshold and never review load, and the screener's
own sensitivity on the golden set is reported beside the judge's.

On the previous code the thresholds read a screened-out trace's missing score as escalated, so
as routed to a person: a 0% miss rate beside a sensitivity of 0.57 in the same output."""

from __future__ import annotations

import orjson
import polars as pl
import pytest
from statsmodels.stats.proportion import proportion_confint

from orchestrator.studies.trace_audit.agreement import agreement_table, screener_table, thresholds
from tests.conftest import ROOT, cli

SCHEMA = {
    "trace_id": pl.String,
    "bias": pl.String,
    "judge_score": pl.Int64,
    "ref_score": pl.Int64,
    "ref_flag": pl.Boolean,
    "screened_out": pl.Boolean,
}


def planted() -> pl.DataFrame:
    """20 traces. Anchoring: flagged on t00-t09, the judge scoring 1 1 2 2 2 3 4 and the
    screener clearing t07-t09 unjudged; clean on t10-t19, the judge scoring 3 4 4 5 5 2, t16
    escalated (no score, not screened out) and t17-t19 cleared. Confirmation: flagged on t07,
    t08 (both cleared) and t10 (judged 2); clean elsewhere, scored 4 where judged."""
    scores = [1, 1, 2, 2, 2, 3, 4, None, None, None, 3, 4, 4, 5, 5, 2, None, None, None, None]
    cleared = [i in (7, 8, 9, 17, 18, 19) for i in range(20)]
    rows = []
    for i in range(20):
        trace = f"t{i:02d}"
        rows.append((trace, "Anchoring", scores[i], 2 if i < 10 else 4, i < 10, cleared[i]))
        flagged = i in (7, 8, 10)
        judged = None if scores[i] is None and i != 10 else (2 if i == 10 else 4)
        rows.append((trace, "Confirmation", judged, 2 if flagged else 4, flagged, cleared[i]))
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def test_screened_out_flagged_traces_are_misses_at_every_threshold():
    row = thresholds(planted(), target_risk=0.3).row(0, named=True)
    # misses at t = 1..4: 8, 5, 4, 3 of 10 (3 of them cleared by the screener whatever t is)
    assert (row["bias"], row["threshold"], row["screened_out"]) == ("Anchoring", 4, 3)
    assert row["miss_rate"] == pytest.approx(0.3)
    assert row["miss_upper"] == pytest.approx(proportion_confint(3, 10, method="wilson")[1])
    # load at t = 4: judged clean traces scored <= 4 (3 4 4 2) and the escalated one; the
    # three the screener cleared reach nobody, so they are no load
    assert row["review_load"] == pytest.approx(5 / 10)


def test_no_threshold_beats_what_the_screener_already_missed():
    row = thresholds(planted(), target_risk=0.2).row(0, named=True)
    assert row["threshold"] is None
    assert row["note"].endswith(
        "misses 3 of 10 reference-flagged traces (3 cleared by the screener unjudged)"
    )
    confirmation = thresholds(planted(), target_risk=0.5).row(1, named=True)
    assert confirmation["threshold"] is None and confirmation["screened_out"] == 2


def test_without_a_screener_nothing_changes():
    frame = planted().with_columns(pl.lit(None, pl.Boolean).alias("screened_out"))
    row = thresholds(frame, target_risk=0.3).row(0, named=True)
    # the null scores now read as escalated: routed, so t = 2 misses only 3 and 4
    assert (row["threshold"], row["screened_out"]) == (2, 0)
    assert row["miss_rate"] == pytest.approx(0.2)
    assert screener_table(frame).height == 0
    assert screener_table(frame.drop("screened_out")).height == 0


def test_the_screeners_sensitivity_per_bias_and_over_any_bias():
    table = screener_table(planted())
    rows = {r["bias"]: r for r in table.iter_rows(named=True)}
    assert list(rows) == ["Anchoring", "Confirmation", "any bias"]
    assert (rows["Anchoring"]["ref_flagged"], rows["Anchoring"]["sent_on"]) == (10, 7)
    assert rows["Anchoring"]["sensitivity"] == pytest.approx(0.7)
    low, high = proportion_confint(7, 10, method="wilson")
    assert (rows["Anchoring"]["sensitivity_low"], rows["Anchoring"]["sensitivity_high"]) == (
        pytest.approx((low, high))
    )
    assert (rows["Confirmation"]["ref_flagged"], rows["Confirmation"]["sent_on"]) == (3, 1)
    # any bias: t00-t10 flagged (11 traces), t07-t09 cleared; clean t11-t19, t17-t19 cleared
    every = rows["any bias"]
    assert (every["ref_flagged"], every["sent_on"]) == (11, 8)
    assert (every["ref_clean"], every["cleared"]) == (9, 3)
    assert every["specificity"] == pytest.approx(3 / 9)
    # the judge cannot catch what the screener cleared: its sensitivity sits under the screen's
    judge = agreement_table(planted()).row(0, named=True)
    assert judge["sensitivity"] <= rows["Anchoring"]["sensitivity"]


def test_calibrate_on_a_screened_golden_audit_counts_the_screeners_misses(tmp_path):
    golden = ROOT / "jobs" / "trace-audit-golden.jsonl"
    done = cli(
        "audit",
        str(golden),
        "--judge",
        "simulated",
        "--screener",
        "simulated",
        "--output-dir",
        "out",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    run = tmp_path / "out" / "trace-audit-golden" / "default"
    done = cli("calibrate", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "neither judged nor reviewed" in " ".join(done.stdout.split())
    records = [orjson.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]
    labels = {
        orjson.loads(x)["trace_id"]: orjson.loads(x)["reference"]
        for x in golden.read_bytes().splitlines()
    }
    cleared = {
        r["variant"]
        for r in records
        if (r["response"].get("screen") or {}).get("possibleBias") is False
    }
    assert cleared  # the simulated screener clears about half of the traces
    picks = pl.read_csv(run / "calibration" / "thresholds.csv")
    screen = pl.read_csv(run / "calibration" / "screener.csv")
    for row in picks.iter_rows(named=True):
        flagged = {t for t, ref in labels.items() if ref[row["bias"]]["score"] <= 2}
        assert row["screened_out"] == len(flagged & cleared)
        if row["threshold"] is not None:  # never under what the screener alone missed
            assert row["miss_rate"] >= len(flagged & cleared) / len(flagged)
        sens = screen.filter(pl.col("bias") == row["bias"]).row(0, named=True)
        assert sens["sensitivity"] == pytest.approx(1 - len(flagged & cleared) / len(flagged))

"""Extreme numeric answers (issue 29, item 12): a model that answers 1.5e22 to "estimate the
price" keeps its mean (the spec's measure), and beside it the robust shift (Hodges-Lehmann, with
the Brunner-Munzel p and interval), the flag that a few answers dominate the mean, and the count
of answers outside a job's plausibleRange, in analyze, the report, the viewer and compare's
effects. The statistics are checked against scipy and against brute force over all pairwise
differences; the p and interval under unequal spreads in tests/test_robust_interval.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats

from orchestrator.analysis import robust
from orchestrator.analysis.summary import analyze
from orchestrator.studies.paired.table import robust_cell
from tests.conftest import ROOT, cli, run_quietly, write_config

ANCHORING = "anchoring-first-number"
PLANTED = 1150 - 880  # the anchoring effect the simulated model is given
RUNAWAY = 1.5e22


@pytest.mark.parametrize("ties", [False, True])
def test_hodges_lehmann_is_the_median_of_all_differences_with_scipys_brunner_munzel_p(ties):
    rng = np.random.default_rng(7 + ties)
    for _ in range(40):
        n, m = (int(x) for x in rng.integers(6, 45, 2))
        draw = (
            (lambda k: rng.integers(1, 8, k).astype(float))
            if ties
            else (lambda k: rng.normal(size=k))
        )
        a, b = draw(n) + 0.7, draw(m)
        shift = robust.hodges_lehmann(a, b)
        differences = np.sort(np.subtract.outer(a, b).ravel())
        assert shift.estimate == np.median(differences)
        assert shift.low in differences and shift.high in differences
        assert shift.low <= shift.estimate <= shift.high
        assert shift.p == pytest.approx(stats.brunnermunzel(a, b).pvalue, rel=1e-9)


def test_selection_beyond_the_brute_force_size_finds_the_same_differences(monkeypatch):
    """The path for large cells (no n*m array) returns the very floats sorting would."""
    rng = np.random.default_rng(3)
    monkeypatch.setattr(robust, "BRUTE_PAIRS", 0)
    monkeypatch.setattr(robust, "SORTED_CANDIDATES", 0)  # searched to the very difference
    for trial in range(60):
        n, m = (int(x) for x in rng.integers(1, 60, 2))
        a = rng.integers(0, 5, n) * 10.0 if trial % 2 else rng.lognormal(6, 1, n)
        b = rng.integers(0, 5, m) * 10.0 if trial % 2 else rng.lognormal(6, 1, m)
        ks = rng.integers(0, n * m, 5)
        expected = np.sort(np.subtract.outer(a, b).ravel())[ks]
        assert (robust.order_differences(a, b, ks) == expected).all()


def test_repeated_answers_are_counted_per_distinct_value(monkeypatch):
    """Ratings and round numbers: the differences of the distinct values, weighted by their
    pair counts, give the very floats sorting all n*m differences would, without a search."""
    rng = np.random.default_rng(4)

    def no_search(*args):
        raise AssertionError("searched, though the distinct values' differences were few")

    monkeypatch.setattr(robust, "_count", no_search)
    for trial in range(60):
        n, m = (int(x) for x in rng.integers(10, 400, 2))  # over 63 pairs: never sorted whole
        scale = 1e16 if trial % 3 == 0 else 1.0  # rounding in the differences too
        a = scale + rng.integers(0, 7, n) * rng.choice([0.5, 3.0])
        b = scale + rng.integers(0, 9, m) * 1.5
        monkeypatch.setattr(robust, "BRUTE_PAIRS", min(63, n * m - 1))
        ks = np.concatenate([[0, n * m - 1, (n * m - 1) // 2], rng.integers(0, n * m, 5)])
        expected = np.sort(np.subtract.outer(a, b).ravel())[ks]
        assert (robust.order_differences(a, b, ks) == expected).all()


def test_a_search_narrowed_to_few_candidates_sorts_them_with_their_weights(monkeypatch):
    """The search's last stage: once at most SORTED_CANDIDATES distinct differences are left
    open, they are sorted with their pair counts, after the rows' bounds have moved."""
    rng = np.random.default_rng(8)
    counted = []
    count = robust._count
    monkeypatch.setattr(robust, "_count", lambda *args: counted.append(1) or count(*args))
    monkeypatch.setattr(robust, "BRUTE_PAIRS", 0)
    monkeypatch.setattr(robust, "SORTED_CANDIDATES", 40)
    for trial in range(60):
        n, m = (int(x) for x in rng.integers(30, 200, 2))
        a = rng.integers(0, 40, n) * 2.5 if trial % 2 else rng.lognormal(6, 1, n).round(1)
        b = rng.integers(0, 50, m) * 1.5 if trial % 2 else rng.lognormal(6, 1, m).round(1)
        ks = np.concatenate([[0, n * m - 1], rng.integers(0, n * m, 6)])
        expected = np.sort(np.subtract.outer(a, b).ravel())[ks]
        assert (robust.order_differences(a, b, ks) == expected).all()
    assert len(counted) > 200  # the bounds were narrowed by searches before the sort


def test_a_large_cell_of_ratings_gives_the_sorted_differences_shift():
    rng = np.random.default_rng(6)
    a, b = rng.integers(1, 11, 3_000) * 1.0, rng.integers(1, 11, 2_500) * 1.0 + 0.5
    shift = robust.hodges_lehmann(a, b)  # 7.5e6 pairs: above BRUTE_PAIRS
    differences = np.sort(np.subtract.outer(a, b).ravel())
    assert len(differences) > robust.BRUTE_PAIRS
    assert shift.estimate == np.median(differences)
    assert shift.p == pytest.approx(stats.brunnermunzel(a, b).pvalue, rel=1e-9)
    # every difference is a half point: the ends are where the test's p crosses 0.05, a
    # quarter point outside rejected, at or a quarter point inside not
    assert shift.low in differences and shift.high in differences
    assert stats.brunnermunzel(a - (shift.low - 0.25), b).pvalue < 0.05
    assert stats.brunnermunzel(a - (shift.high + 0.25), b).pvalue < 0.05
    for end, inward in ((shift.low, 0.25), (shift.high, -0.25)):
        near = [stats.brunnermunzel(a - d, b).pvalue for d in (end, end + inward)]
        assert max(near) >= 0.05


def test_selection_counts_on_the_rounded_differences_sorting_sees(monkeypatch):
    """Answers where a - pivot and a_i - b_j round differently (large magnitudes, tiny gaps):
    the counting search lands on the crossing of the rounded differences themselves."""
    rng = np.random.default_rng(5)
    monkeypatch.setattr(robust, "BRUTE_PAIRS", 0)
    monkeypatch.setattr(robust, "SORTED_CANDIDATES", 0)
    for _ in range(40):
        n, m = (int(x) for x in rng.integers(20, 80, 2))
        a = 1e16 + rng.integers(-40, 40, n) * rng.choice([0.5, 1.0, 3.0], n)
        b = 1e16 + rng.integers(-40, 40, m) * rng.choice([0.5, 1.0, 3.0], m)
        ks = rng.integers(0, n * m, 6)
        expected = np.sort(np.subtract.outer(a, b).ravel())[ks]
        assert (robust.order_differences(a, b, ks) == expected).all()


def test_the_interval_covers_a_planted_shift_at_its_level():
    rng = np.random.default_rng(11)
    normal = [
        robust.hodges_lehmann(rng.normal(3, 1, 20), rng.normal(0, 1, 20)) for _ in range(1000)
    ]
    covered = np.mean([s.low <= 3 <= s.high for s in normal])
    assert 0.93 <= covered <= 0.97, covered  # nominal 95.1% at 20 a side; +-3 SE of 1000 draws
    # ratings tie: the closed interval is then conservative, never short
    ratings = [
        robust.hodges_lehmann(
            np.clip(np.round(rng.normal(4, 1.2, 20)), 1, 6) + 1,
            np.clip(np.round(rng.normal(4, 1.2, 20)), 1, 6),
        )
        for _ in range(400)
    ]
    assert np.mean([s.low <= 1 <= s.high for s in ratings]) >= 0.95


def test_two_answers_dominating_the_mean_are_flagged_and_ordinary_answers_are_not():
    rng = np.random.default_rng(5)
    for n in (20, 100):
        fired = [
            robust.leave_two_out(rng.normal(1150, 120, n), rng.normal(880, 120, n)).dominated
            for _ in range(1000)
        ]
        assert not any(fired), f"{sum(fired)} of 1000 normal samples of {n} flagged"
    a, b = rng.normal(1150, 120, 20), rng.normal(880, 120, 20)
    b[3] = RUNAWAY
    found = robust.leave_two_out(a, b)
    # the runaway answer and the next farthest from its condition's median, left out by hand
    far = sorted(
        [(abs(x - np.median(a)), "a", i) for i, x in enumerate(a)]
        + [(abs(x - np.median(b)), "b", i) for i, x in enumerate(b)]
    )[-2:]
    drop = {side: [i for _, s, i in far if s == side] for side in "ab"}
    kept_a, kept_b = np.delete(a, drop["a"]), np.delete(b, drop["b"])
    assert found.dominated and found.without == pytest.approx(kept_a.mean() - kept_b.mean())
    assert found.half_width == pytest.approx(
        stats.ttest_ind(kept_a, kept_b, equal_var=False).confidence_interval().high
        - (kept_a.mean() - kept_b.mean())
    )
    a[0], b[3] = 9e6, 880.0  # one runaway price in the other condition
    assert robust.leave_two_out(a, b).dominated
    assert robust.leave_two_out([1.0, 2.0], [3.0, 4.0, 5.0]).dominated is None  # too few
    assert (
        robust.outside([-1, 0, 5, 10, 11], 0, 10) == 2 and robust.outside([1], None, None) is None
    )


def _clean(kind: str, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """n answers a condition: anchoring-like prices (treated 1150, control 880) of a shape."""
    if kind == "normal":
        return rng.normal(1150, 120, n), rng.normal(880, 120, n)
    if kind == "t3":
        return 1150 + 120 * rng.standard_t(3, n), 880 + 120 * rng.standard_t(3, n)
    sigma = float(kind.removeprefix("lognormal "))
    return rng.lognormal(np.log(1150), sigma, n), rng.lognormal(np.log(880), sigma, n)


def _rate(kind: str, n: int, plant=None, samples: int = 3000) -> float:
    rng = np.random.default_rng(2029)
    fired = 0
    for _ in range(samples):
        a, b = _clean(kind, n, rng)
        if plant is not None:
            b[rng.integers(n)] = plant(b)
        fired += bool(robust.leave_two_out(a, b).dominated)
    return fired / samples


@pytest.mark.parametrize(
    ("kind", "n", "at_most"),
    [
        ("normal", 20, 0.0),  # measured 0
        ("normal", 100, 0.0),  # 0
        ("t3", 20, 0.01),  # 0.5%
        ("lognormal 1", 20, 0.04),  # 1.7%; the first rule (one half-width): 15%
        ("lognormal 1", 100, 0.01),  # 0.2%
        ("lognormal 1.5", 100, 0.05),  # 2.8%; 10% at n = 20, where a tail that heavy carries it
    ],
)
def test_the_dominated_flag_stays_off_on_clean_skewed_answers(kind, n, at_most):
    """The calibration leave_two_out states, 3,000 seeded samples each."""
    rate = _rate(kind, n)
    assert rate <= at_most, f"{kind}, n = {n}: fired on {rate:.1%}"


@pytest.mark.parametrize(
    ("kind", "plant"),
    [
        ("normal", lambda b: RUNAWAY),
        ("lognormal 1", lambda b: 1000 * np.median(b)),
    ],
    ids=["1.5e22 among prices", "1000 x the median, lognormal"],
)
@pytest.mark.parametrize("n", [20, 100])
def test_the_dominated_flag_fires_on_every_planted_runaway(kind, plant, n):
    assert _rate(kind, n, plant) == 1.0


def test_a_small_move_is_not_dominated_even_when_the_rest_is_constant():
    """19 answers of 20 and one of 25 against 20 of 18: the rest has no spread (a CI of width
    0), but 2.0 becoming 2.25 is no domination. Where the rest is constant and the same in both
    conditions, the difference is the extreme answers alone: that counts."""
    found = robust.leave_two_out([20.0] * 19 + [25.0], [18.0] * 20)
    assert found.without == 2.0 and found.half_width == 0.0 and not found.dominated
    assert found.threshold == pytest.approx(0.5)  # a quarter of 2.0
    assert robust.leave_two_out([20.0] * 19 + [25.0], [20.0] * 20).dominated
    assert not robust.leave_two_out([20.0] * 20, [20.0] * 20).dominated  # no move at all


# --- the paired study, end to end ------------------------------------------------------------


def _paired_run(folder: Path, plausible: list | None) -> Path:
    spec = json.loads((ROOT / "jobs" / "paired.json").read_text(encoding="utf-8"))
    for e in spec["experiments"]:
        if e["experimentSlug"] == ANCHORING and plausible is not None:
            e["plausibleRange"] = plausible
    job = folder / "job.json"
    job.write_text(json.dumps(spec), encoding="utf-8")
    config = write_config(
        folder,
        f"""
name = "runaway"
jobs = ["{job}"]
samples = 100
output_dir = "{folder / "runs"}"
[[models]]
provider = "simulated"
name = "sim"
temperature = 1.0
[models.simulate.effects.{ANCHORING}]
conditions = [{{mean = 1150, sd = 120}}, {{mean = 880, sd = 120}}]
[models.simulate.effects.framing-survival-mortality]
conditions = [{{mean = 5.2, sd = 1.1}}, {{mean = 4.1, sd = 1.3}}]
""",
    )
    return run_quietly(config).run_dir


def _plant(run_dir: Path, experiment: str, condition: int, value: float) -> None:
    """One valid answer of `experiment` in `condition` becomes `value` (the file's other lines
    stay byte for byte)."""
    path = run_dir / "results.ndjson"
    lines, done = path.read_bytes().splitlines(), False
    for i, line in enumerate(lines):
        rec = orjson.loads(line)
        if not done and (rec["experimentSlug"], rec["conditionIndex"], rec["status"]) == (
            experiment,
            condition,
            "ok",
        ):
            rec["response"]["value"] = value
            lines[i], done = orjson.dumps(rec), True
    assert done
    path.write_bytes(b"\n".join(lines) + b"\n")


def _answers(run_dir: Path, experiment: str) -> dict[int, np.ndarray]:
    recs = [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]
    return {
        c: np.array(
            [
                r["response"]["value"]
                for r in recs
                if r["experimentSlug"] == experiment
                and r["conditionIndex"] == c
                and r["status"] == "ok"
            ]
        )
        for c in (0, 1)
    }


@pytest.fixture(scope="module")
def runaway(tmp_path_factory) -> tuple[Path, pl.DataFrame]:
    """A demo-like anchoring run (100 answers a condition), analysed as it came, then with one
    answer of 1.5e22: (run folder, the summary before the planted answer)."""
    run_dir = _paired_run(tmp_path_factory.mktemp("runaway"), [0, 100_000])
    before = analyze(run_dir).tables["summary"]
    _plant(run_dir, ANCHORING, 1, RUNAWAY)
    return run_dir, before


def _row(summary: pl.DataFrame, experiment: str) -> dict:
    return summary.filter(pl.col("experimentSlug") == experiment).row(0, named=True)


def test_ordinary_answers_raise_no_flag_and_are_all_plausible(runaway):
    _, before = runaway
    numbers = before.filter(pl.col("metric_type") == "mean-difference")
    assert numbers.height == 4 and numbers["dominated"].to_list() == [False] * 4
    row = _row(before, ANCHORING)
    assert (row["n_implausible"], row["n_implausible_0"], row["n_implausible_1"]) == (0, 0, 0)
    assert row["hl_ci_low"] <= PLANTED <= row["hl_ci_high"]
    # the robust and the spec's estimate agree on normal answers
    assert abs(row["hl_effect"] - row["effect"]) < (row["ci_high"] - row["ci_low"]) / 4
    assert not any("dominate" in f or "plausible" in f for flags in before["flags"] for f in flags)
    # no range declared: no count, rather than a count of 0 that says "checked"
    assert _row(before, "planning-fallacy-reference-class")["n_implausible"] is None
    shares = before.filter(pl.col("metric_type") == "choice-share-difference")
    assert shares["hl_effect"].is_null().all() and shares["dominated"].is_null().all()


def test_a_runaway_answer_keeps_the_mean_and_is_flagged_beside_it(runaway):
    run_dir, _ = runaway
    summary = analyze(run_dir).tables["summary"]
    row = _row(summary, ANCHORING)
    answers = _answers(run_dir, ANCHORING)
    # the spec's measure, as the demo printed it: -1.5e20, with a CI that spans 0
    assert row["effect"] == pytest.approx(answers[0].mean() - answers[1].mean(), rel=1e-12)
    assert row["effect"] == pytest.approx(-RUNAWAY / 100, rel=1e-6)
    welch = stats.ttest_ind(answers[0], answers[1], equal_var=False).confidence_interval()
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((welch.low, welch.high), rel=1e-9)
    assert row["ci_low"] < 0 < row["ci_high"] and not row["significant"]
    # beside it, the robust shift: the median of the 100 x 100 differences, near the planted one
    assert row["hl_effect"] == np.median(np.subtract.outer(answers[0], answers[1]))
    assert abs(row["hl_effect"] - PLANTED) < 40
    assert row["hl_ci_low"] <= PLANTED <= row["hl_ci_high"] and row["hl_ci_low"] > 0
    assert row["hl_p"] == pytest.approx(stats.brunnermunzel(answers[0], answers[1]).pvalue)
    assert row["hl_p"] < 1e-10
    assert row["dominated"] is True
    assert abs(row["effect_without_extremes"] - PLANTED) < 60
    assert (row["n_implausible"], row["n_implausible_0"], row["n_implausible_1"]) == (1, 0, 1)
    flags = "; ".join(row["flags"])
    assert "a few answers dominate the mean" in flags
    assert "1 answer(s) outside the plausible range [0, 100,000] (c0 0, c1 1)" in flags
    # the other experiments' answers are untouched: no flag there
    others = summary.filter(
        (pl.col("metric_type") == "mean-difference") & (pl.col("experimentSlug") != ANCHORING)
    )
    assert others["dominated"].to_list() == [False] * 3


def test_the_effects_compare_and_the_viewer_read_carry_the_robust_columns(runaway):
    from orchestrator.nightly.effects import run_effects

    run_dir, _ = runaway
    effects = run_effects(run_dir).effects
    row = effects.filter(pl.col("experiment") == ANCHORING).row(0, named=True)
    summary = _row(analyze(run_dir).tables["summary"], ANCHORING)
    assert (row["robust"], row["robust_low"], row["robust_high"]) == (
        summary["hl_effect"],
        summary["hl_ci_low"],
        summary["hl_ci_high"],
    )
    assert row["dominated"] is True and row["implausible"] == 1
    shares = effects.filter(pl.col("measure") == "choice-share-difference")
    assert shares["robust"].is_null().all() and shares["dominated"].is_null().all()


def test_the_viewer_serves_the_robust_estimate_and_the_flags(runaway):
    from tests.test_viewer_api import Served

    run_dir, _ = runaway
    served = Served(run_dir)
    try:
        body = served.ok("/api/overview")
        [row] = [e for e in body["effects"] if e["experiment"] == ANCHORING]
        assert row["dominated"] is True and row["implausible"] == 1
        assert abs(row["robust"] - PLANTED) < 40 and row["robust_low"] <= PLANTED
        one = served.ok(
            "/api/effect",
            study="paired",
            measure="mean-difference",
            experiment=ANCHORING,
            strategy="baseline",
            model=row["modelKey"],
        )
        assert one["effect"]["robust"] == row["robust"] and one["effect"]["dominated"] is True
    finally:
        served.close()
    page = (ROOT / "orchestrator" / "viewer" / "static" / "app.js").read_text(encoding="utf-8")
    assert "e.robust" in page and "e.dominated" in page and "e.implausible" in page


def test_analyze_and_the_report_show_the_robust_column_and_mark_the_dominated_mean(
    runaway, monkeypatch
):
    run_dir, _ = runaway
    monkeypatch.setenv("COLUMNS", "400")  # one line per row, to read the cells back
    shown = cli("analyze", str(run_dir), cwd=run_dir.parent)
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if ANCHORING in x)
    cells = [c.strip() for c in line.split("│")]
    assert cells[5].endswith("†") and cells[7] == robust_cell(
        _row(analyze(run_dir).tables["summary"], ANCHORING)
    )
    assert "robust [95% CI]" in shown.stdout
    assert cli("report", str(run_dir), cwd=run_dir.parent).returncode == 0
    report = (run_dir / "report" / "report.md").read_text(encoding="utf-8")
    header = next(x for x in report.splitlines() if x.startswith("| experiment |"))
    assert "robust shift (HL) [95% CI]" in header and "outside plausible range" in header
    row = next(x for x in report.splitlines() if x.startswith(f"| {ANCHORING} |"))
    assert "† |" in row and "Hodges-Lehmann" in report
    assert "Numbers also get a robust shift beside the spec's mean difference" in report


def test_which_answers_are_left_out_does_not_depend_on_their_order():
    """Two answers equally far from the median (3 and 7 around 5) but only room to leave out
    one of them: an online and a batch run write the same answers in other orders, and must
    get the same figures."""
    from orchestrator.analysis.robust import leave_two_out

    a = np.array([5.0, 5.0, 3.0, 5.0, 7.0, 5.0, 5.0, 5.0, 30.0])
    b = np.array([4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0])
    rng = np.random.default_rng(0)
    seen = {leave_two_out(rng.permutation(a), rng.permutation(b)).without for _ in range(20)}
    assert len(seen) == 1, seen

"""The regression gate over many simulated re-audits of the golden set (issue 29, item 6).

Each seed audits the 64 golden traces twice with judges that agree with the reference labels at
0.9, each run with its own noise (as the simulated provider does with another seed: the
reference score kept with probability 0.9, else one point off, clipped to 1-5; an output that
fails validation twice leaves the whole trace without a score). A second null keeps part of
the judge's disagreement on the same traces in both runs (content-driven, as a real judge at
temperature 0 disagrees with the labels on the same traces every time), with re-audit noise on
top. An unchanged judge must pass in at least 95% of seeds; a judge that stopped catching one
bias must fail in every seed. The rates are printed (pytest -s) for the closing note.

A third null draws the judge's noise from a view of its own, not from the labels it is checked
against (own_view). With no tolerance every test is live, and over 1000 seeds the false-alarm
rate's Clopper-Pearson bound must stay under 7%. Judges that catch little, escalate most traces
or drift from run to run: test_trace_audit_gate_alpha.py and test_trace_audit_gate_drift.py.

On the previous gate (any one caught trace missed now failed it) the first assertion fails:
its verdict, recomputed here from the same comparisons, fails 76% of the seeds (62% without
escalations).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats

from orchestrator.studies.trace_audit.gate import gate
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

GOLDEN = Path(__file__).resolve().parents[1] / "jobs" / "trace-audit-golden.jsonl"
AGREEMENT = 0.9
ESCALATED = 0.1**2  # invalid_rate 0.1, retried once: both outputs fail


def golden_labels() -> tuple[list[str], np.ndarray]:
    """Trace ids and their reference scores (traces x biases)."""
    rows = [orjson.loads(line) for line in GOLDEN.read_bytes().splitlines() if line.strip()]
    refs = np.array([[r["reference"][b]["score"] for b in BIAS_TYPES] for r in rows])
    return [r["trace_id"] for r in rows], refs


IDS, REF = golden_labels()
FLAGGED = REF <= 2


def noisy(scores: np.ndarray, keep: float, rng: np.random.Generator) -> np.ndarray:
    """Each score kept with probability `keep`, else one point up or down, clipped to 1-5."""
    step = rng.choice((-1, 1), size=scores.shape)
    return np.where(rng.random(scores.shape) < keep, scores, np.clip(scores + step, 1, 5))


def audit(
    rng: np.random.Generator, opinion: np.ndarray = REF, keep: float = AGREEMENT, miss=None
) -> np.ndarray:
    """One run's scores (float, NaN for no validated audit): `opinion` re-audited with noise;
    `miss` {bias index: chance} scores a reference-flagged bias 4, as the simulated judge's
    `miss` does."""
    scores = noisy(opinion, keep, rng).astype(float)
    for b, chance in (miss or {}).items():
        lost = FLAGGED[:, b] & (rng.random(len(IDS)) < chance)
        scores[lost, b] = 4
    scores[rng.random(len(IDS)) < ESCALATED] = np.nan
    return scores


def frame(scores: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "trace_id": np.repeat(IDS, len(BIAS_TYPES)),
            "bias": np.tile(BIAS_TYPES, len(IDS)),
            "judge_score": pl.Series(scores.ravel(), nan_to_null=True).cast(pl.Int64),
            "ref_score": REF.ravel(),
            "ref_flag": FLAGGED.ravel(),
        }
    )


def old_verdict(result, tolerance: float = 0.5) -> bool:
    """The previous gate's rule, from the same comparison: fail on any one lost catch or on a
    mean shift whose point estimate is beyond the tolerance."""
    moved = result.shifts["difference"].abs().fill_null(0) > tolerance + 1e-9
    return result.missed.height == 0 and not moved.any()


def verdicts(make_pair, seeds: int, **options) -> tuple[np.ndarray, np.ndarray]:
    """(new gate passed, old rule passed) per seed."""
    new, old = [], []
    for seed in range(seeds):
        current, baseline = make_pair(np.random.default_rng([29, seed]))
        result = gate(frame(current), frame(baseline), **options)
        new.append(result.ok)
        old.append(old_verdict(result))
    return np.array(new), np.array(old)


def independent_noise(rng):
    return audit(rng), audit(rng)


def persistent_disagreement(rng):
    """The judge's own view of each trace (agreeing with the labels at 0.85) kept by both runs,
    each run re-audited around it at 0.9."""
    opinion = noisy(REF, 0.85, rng)
    return audit(rng, opinion), audit(rng, opinion)


VIEW_WEIGHT, RUN_NOISE = 0.4, 0.4  # flag agreement with the labels 0.91, about 12 flips a pair


def viewed(
    view: np.ndarray,
    rng: np.random.Generator,
    miss=None,
    lean: float = 0.0,
    escalated: float = ESCALATED,
    offset: float = 0.0,
) -> np.ndarray:
    """One run of a judge with a view of its own: its latent score of each trace is the label
    mixed with `view` (drawn once per judge version, independent of the labels), each run adds
    its own noise before rounding, so a flagged trace the judge sees as milder can be missed in
    one run and caught in the next, whatever its label. `lean` raises every latent score (a
    judge that catches less: 1.2, 0.94, 0.74 catch a flagged trace with chance 0.15, 0.25,
    0.35 against 0.75 at 0); `escalated` is the chance a whole trace has no validated audit;
    `offset`, the SD of a shift of the whole run's latent scores (run-to-run variation)."""
    shift = lean + rng.normal(0, offset) if offset else lean
    latent = (1 - VIEW_WEIGHT) * REF + VIEW_WEIGHT * view + shift
    scores = np.clip(np.rint(latent + rng.normal(0, RUN_NOISE, REF.shape)), 1, 5)
    for b, chance in (miss or {}).items():
        scores[FLAGGED[:, b] & (rng.random(len(IDS)) < chance), b] = 4
    scores[rng.random(len(IDS)) < escalated] = np.nan
    return scores


def own_view(rng):
    """A null whose noise is not drawn from the labels it is checked against: both runs share
    the judge's view, and differ in their per-run noise."""
    view = rng.uniform(1, 5, REF.shape)
    return viewed(view, rng), viewed(view, rng)


def upper_95(failures: int, n: int) -> float:
    """Clopper-Pearson 95% upper bound of a rate."""
    return float(stats.beta.ppf(0.975, failures + 1, n - failures)) if failures < n else 1.0


@pytest.mark.parametrize(
    ("null", "seeds"),
    [
        (independent_noise, 200),
        (persistent_disagreement, 200),
        (own_view, 200),
        pytest.param(independent_noise, 1000, marks=pytest.mark.slow),
        pytest.param(own_view, 1000, marks=pytest.mark.slow),
    ],
)
def test_an_unchanged_judge_passes_at_least_95_percent_of_seeds(null, seeds):
    # Over 200 seeds a gate that fails 10% of the time passes 95% of them with chance 0.002;
    # the slow tier's 1000 seeds give the figures quoted in gate.py.
    new, old = verdicts(null, seeds)
    print(
        f"\n{null.__name__}, {seeds} seeds: gate false alarms {1 - new.mean():.1%}, "
        f"previous rule {1 - old.mean():.1%}"
    )
    assert new.mean() >= 0.95, new.mean()
    # the previous gate failed most of these, for noise alone
    assert 1 - old.mean() > 0.4, old.mean()


@pytest.mark.parametrize("null", [independent_noise, own_view])
def test_with_no_tolerance_the_tests_alone_hold_the_stated_false_alarm_rate(null):
    # tolerance 0: every significant shift fails, so all 8 tests are live. Over 1000 seeds the
    # Clopper-Pearson bound tells a 5% rate from a 10% one (at 5% it is about 0.064).
    new, _ = verdicts(null, 1000, tolerance=0)
    failures = int((~new).sum())
    bound = upper_95(failures, new.size)
    print(
        f"\n{null.__name__}, no tolerance, 1000 seeds: false alarms {failures / new.size:.1%} "
        f"(95% upper bound {bound:.1%}; alpha 5%)"
    )
    assert bound < 0.07, (failures, bound)


def own_view_with(miss):
    def pair(rng):
        view = rng.uniform(1, 5, REF.shape)
        return viewed(view, rng, miss=miss), viewed(view, rng)

    return pair


@pytest.mark.parametrize("bias", range(len(BIAS_TYPES)), ids=BIAS_TYPES)
def test_a_judge_that_stopped_catching_one_bias_fails_every_seed(bias):
    def pair(rng):
        return audit(rng, miss={bias: 1.0}), audit(rng)

    for make in (pair, own_view_with({bias: 1.0})):
        new, _ = verdicts(make, seeds=100)
        print(f"\nstopped catching {BIAS_TYPES[bias]}: failed {new.size - new.sum()} of {new.size}")
        assert not new.any()


def test_the_failure_names_the_bias_that_stopped_being_caught():
    rng = np.random.default_rng(7)
    result = gate(frame(audit(rng, miss={2: 1.0})), frame(audit(rng)))
    failed = result.catches.filter(pl.col("failed"))
    assert failed["bias"].to_list() == ["Availability"]
    assert failed["caught_now"][0] == 0 and failed["floor"][0]
    assert all(f.startswith("Availability:") for f in result.failures)


@pytest.mark.slow
@pytest.mark.parametrize(("chance", "labelled", "viewed_"), [(0.5, 0.55, 0.4), (0.25, 0.04, 0.04)])
def test_a_judge_that_misses_part_of_one_bias_is_caught_more_often_than_noise(
    chance, labelled, viewed_
):
    """Power against a partial regression, for the record (pytest -s), over 1000 seeds: the
    golden set flags 14 traces per bias, so a judge that misses half of them changes about 7,
    and no exact test on 7 changes gets below 2^-7 = 0.008. Measured: 65% (50% under the
    own-view judge) at half, 8% (9%) at a quarter, with escalations as misses and the floor
    rule; now 62% (50%) and 7% (8%)."""

    def pair(rng):
        return audit(rng, miss={0: chance}), audit(rng)

    for make, floor in ((pair, labelled), (own_view_with({0: chance}), viewed_)):
        new, old = verdicts(make, seeds=1000)
        print(
            f"\nmisses {chance:.0%} of Anchoring's flagged traces: gate fails "
            f"{1 - new.mean():.1%} (previous rule {1 - old.mean():.1%})"
        )
        assert 1 - new.mean() >= floor

"""Cohen's kappa for the audit judge against the golden set's reference (issue 14, item 9).

Plain kappa for flags; agreement weights for the 1-5 scores (quadratic: a 4 against a 5 is a
near miss, a 1 against a 5 is not). The large-sample variance is that of Fleiss, Cohen & Everitt
(1969), the one statsmodels' cohens_kappa computes for weighted and plain kappa alike (the tests
check it against statsmodels); the reported interval is a BCa bootstrap over traces (see
weighted_kappa for why). A table that cannot define kappa gives None and a note, computed
without a 0/0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from orchestrator.analysis.stats import Z95

CATEGORIES = (1, 2, 3, 4, 5)
REPS = 2000  # bootstrap resamples
_DEGENERATE = 1e-12  # 1 - chance agreement below this: kappa is 0/0


@dataclass(frozen=True)
class Kappa:
    """A kappa with its asymptotic SE and the reported 95% CI; None where the data cannot
    define them, the `note` saying why."""

    n: int
    kappa: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    method: str  # "bca", "percentile" or "asymptotic": where ci_low/ci_high come from
    note: str | None = None  # why kappa or its CI is missing, or why the CI says little


def agreement_weights(k: int, weights: str | None) -> np.ndarray:
    """k x k agreement weights over equally spaced categories: 1 on the diagonal, falling to 0
    at the far corner linearly or quadratically; the identity for plain kappa."""
    if weights is None:
        return np.eye(k)
    d = np.abs(np.subtract.outer(np.arange(k), np.arange(k))) / (k - 1)
    if weights == "linear":
        return 1 - d
    if weights == "quadratic":
        return 1 - d**2
    raise ValueError(f"weights must be 'quadratic', 'linear' or None, not {weights!r}")


def rating_codes(values, categories) -> np.ndarray:
    index = {c: i for i, c in enumerate(categories)}
    try:
        return np.array([index[v] for v in values], dtype=np.int64)
    except KeyError as e:
        raise ValueError(f"{e.args[0]!r} is not one of the categories {categories}") from None


def count_tables(judge: np.ndarray, ref: np.ndarray, k: int) -> np.ndarray:
    """Judge-by-reference counts for each row of `judge`/`ref` (shape (B, n)): (B, k, k)."""
    b = judge.shape[0]
    flat = (judge * k + ref + (np.arange(b) * k * k)[:, None]).ravel()
    return np.bincount(flat, minlength=b * k * k).reshape(b, k, k).astype(float)


def table(judge, ref, categories) -> np.ndarray:
    """Judge-by-reference counts of paired ratings, every category present: (k, k)."""
    judge, ref = rating_codes(judge, categories)[None], rating_codes(ref, categories)[None]
    return count_tables(judge, ref, len(categories))[0]


def _kappa(tables: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kappa, variance) of each (k, k) table, NaN where chance agreement is 1 (each rater used
    a single category, the same one) or the table is empty. Masked, not divided then discarded,
    so a degenerate table raises no warning."""
    n = tables.sum(axis=(1, 2))
    ok = n > 0
    p = tables / np.where(ok, n, 1)[:, None, None]
    rows, cols = p.sum(axis=2), p.sum(axis=1)
    observed = (w * p).sum(axis=(1, 2))
    chance = np.einsum("ij,bi,bj->b", w, rows, cols)
    ok &= (1 - chance) > _DEGENERATE
    denom = np.where(ok, 1 - chance, 1.0)
    kappa = (observed - chance) / denom
    # FCE 1969: each cell's weight against the mean weights of its row and column.
    w_row = np.einsum("ij,bj->bi", w, cols)
    w_col = np.einsum("ij,bi->bj", w, rows)
    spread = w - (w_row[:, :, None] + w_col[:, None, :]) * (1 - kappa)[:, None, None]
    var = (p * spread**2).sum(axis=(1, 2)) - (kappa - chance * (1 - kappa)) ** 2
    var = np.maximum(var, 0.0) / (denom**2 * np.where(n > 0, n, 1))
    return np.where(ok, kappa, np.nan), np.where(ok, var, np.nan)


def asymptotic_ci(kappa: float, se: float) -> tuple[float, float]:
    """kappa -/+ 1.96 SE, cut to kappa's range [-1, 1]."""
    return max(-1.0, kappa - Z95 * se), min(1.0, kappa + Z95 * se)


def _jackknife(judge: np.ndarray, ref: np.ndarray, k: int, w: np.ndarray) -> np.ndarray:
    """Leave-one-out kappas: the full table less each trace's own cell."""
    tables = np.repeat(count_tables(judge[None], ref[None], k), len(judge), axis=0)
    tables[np.arange(len(judge)), judge, ref] -= 1
    return _kappa(tables, w)[0]


def _bca_levels(boot: np.ndarray, estimate: float, jack: np.ndarray) -> np.ndarray:
    """Efron's bias-corrected and accelerated quantile levels for a 95% interval: z0 from the
    share of resamples below the estimate (ties count half), the acceleration from the
    jackknife's skewness."""
    below = (np.sum(boot < estimate) + 0.5 * np.sum(boot == estimate)) / len(boot)
    z0 = stats.norm.ppf(np.clip(below, 0.5 / len(boot), 1 - 0.5 / len(boot)))
    dev = jack.mean() - jack if len(jack) > 1 else np.zeros(1)
    ss = float((dev**2).sum())
    a = float((dev**3).sum()) / (6 * ss**1.5) if ss > 1e-24 else 0.0
    z = z0 + stats.norm.ppf([0.025, 0.975])
    if np.any(1 - a * z <= 0):  # an acceleration this large folds the levels over: drop it
        a = 0.0
    return stats.norm.cdf(z0 + z / (1 - a * z))


def bootstrap_ci(
    judge: np.ndarray,
    ref: np.ndarray,
    k: int,
    w: np.ndarray,
    reps: int = REPS,
    seed=0,
    bca: bool = True,
) -> tuple[float | None, float | None]:
    """95% interval of kappa over `reps` resamples of the traces (rating codes 0..k-1): BCa, or
    the plain percentile one. A resample whose kappa is undefined is dropped; None when more
    than half are."""
    draw = np.random.default_rng(seed).integers(0, len(judge), size=(reps, len(judge)))
    boot = _kappa(count_tables(judge[draw], ref[draw], k), w)[0]
    boot = boot[~np.isnan(boot)]
    if len(boot) * 2 < reps:
        return None, None
    levels = np.array([0.025, 0.975])
    if bca:
        estimate = _kappa(count_tables(judge[None], ref[None], k), w)[0][0]
        jack = _jackknife(judge, ref, k, w)
        levels = _bca_levels(boot, estimate, jack[~np.isnan(jack)])
    low, high = np.quantile(boot, levels)
    return float(low), float(high)


def weighted_kappa(
    judge,
    ref,
    weights: str | None = "quadratic",
    categories=CATEGORIES,
    ci: str = "bca",
    reps: int = REPS,
    seed=0,
) -> Kappa:
    """Cohen's kappa of paired ratings (no nulls) with its FCE asymptotic SE and a 95% CI.

    The reported CI is the BCa bootstrap over traces (Efron's bias-corrected and accelerated
    percentile interval). Over 400 simulated golden sets of 50 traces (judge = reference with
    probability p, else a uniform rating; skewed reference scores) a nominal 95% covered
    quadratic kappa 0 / .28 / .57 / .73 / .84 in 92 / 93 / 93 / 95 / 90% of sets with BCa,
    93 / 93 / 92 / 92 / 86% with the percentile bootstrap, 91 / 92 / 91 / 89 / 85% with
    kappa -/+ 1.96 SE; flag kappa at the same p: 93 / 94 / 97 / 98 / 95%, 94 / 93 / 93 / 95 /
    92%, 93 / 93 / 93 / 92 / 87%. At high agreement kappa's spread shrinks as kappa rises: a set
    that happened to draw few far disagreements shows a high kappa with a narrow interval, which
    then lies above the truth (nearly all misses were on that side). BCa's acceleration allows
    for a spread that moves with the estimate; the others do not. Its price is a little
    over-coverage of flags at moderate agreement; like the percentile one it stays in [-1, 1].
    No interval covers near-perfect agreement over 50 traces (kappa .94: 67-69% for all
    three; 67-77% over all draws in tests/test_trace_audit_agreement.py): two or three
    disagreements cannot show how rare they are. So the note marks an interval of kappa > 0.9
    over fewer than 100 traces as likely under-covering, and perfect agreement as an interval
    of zero width.
    """
    if ci not in ("bca", "percentile", "asymptotic"):
        raise ValueError(f"ci must be 'bca', 'percentile' or 'asymptotic', not {ci!r}")
    j, r = rating_codes(list(judge), categories), rating_codes(list(ref), categories)
    if len(j) != len(r):
        raise ValueError(f"{len(j)} judge ratings against {len(r)} reference ratings")
    k, w = len(categories), agreement_weights(len(categories), weights)
    kappa, var = _kappa(count_tables(j[None], r[None], k), w)
    if np.isnan(kappa[0]):
        why = (
            "no traces with a validated judge score"
            if len(j) == 0
            else "kappa undefined: judge and reference each gave one and the same rating"
        )
        return Kappa(len(j), None, None, None, None, ci, why)
    value, se = float(kappa[0]), float(np.sqrt(var[0]))
    if ci == "asymptotic":
        low, high = asymptotic_ci(value, se)
    else:
        low, high = bootstrap_ci(j, r, k, w, reps, seed, bca=ci == "bca")
    return Kappa(len(j), value, se, low, high, ci, _note(j, r, value, low))


UNDER_COVERED = 0.9  # above this kappa, and over fewer than UNDER_COVERED_N traces, ...
UNDER_COVERED_N = 100  # ... the interval is too narrow (see weighted_kappa's docstring)


def _note(judge: np.ndarray, ref: np.ndarray, value: float, low: float | None) -> str | None:
    """What makes a defined kappa's interval say little. Perfect agreement is read from the
    ratings, not from the value: summed shares can leave a perfect kappa at 0.9999999999999998."""
    if low is None:
        return "most bootstrap resamples leave kappa undefined"
    for name, codes in (("the judge", judge), ("the reference", ref)):
        if len(set(codes.tolist())) == 1:
            return f"{name} gave every trace the same rating: kappa is 0 by construction"
    if np.array_equal(judge, ref):
        return (
            f"perfect agreement on every trace (n = {len(judge)}): the interval cannot show its "
            "uncertainty"
        )
    if value > UNDER_COVERED and len(judge) < UNDER_COVERED_N:
        return (
            f"kappa {value:.3f} > {UNDER_COVERED:g} over {len(judge)} < {UNDER_COVERED_N} traces: "
            "the 95% interval likely under-covers (in simulation, 67-77% at kappa 0.94 over 50)"
        )
    return None

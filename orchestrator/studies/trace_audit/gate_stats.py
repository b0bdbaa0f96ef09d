"""The exact tests of the audit regression gate (gate.py) and how its false-alarm rate `alpha`
is shared between them: pure functions of numbers, checked against scipy and statsmodels in
tests/test_trace_audit_gate.py."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

ALPHA = 0.05  # the chance an unchanged judge fails the gate, over every rule that can fail it
# alpha's shares (they add up to 1): the catch tests decide what the seed asks first ("previously
# caught biases are missed"); the shifts have a tolerance besides; the escalation test guards the
# catch comparison, which leaves escalated traces out
CATCH_SHARE = 0.8
SHIFT_SHARE = 0.15
ESCALATION_SHARE = 0.05
MIN_PAIRED = 5  # fewest paired differences a paired t-test is run on


def mcnemar_loss_p(lost: int, gained: int) -> float:
    """Exact one-sided McNemar p for more losses than gains: 1 with no discordant pair."""
    if lost + gained == 0:
        return 1.0
    return float(stats.binomtest(lost, lost + gained, 0.5, alternative="greater").pvalue)


def signflip_p(diff: np.ndarray) -> float:
    """Exact one-sided sign-flip (paired randomization) p that the differences lean positive:
    P(sum of e_i |d_i| >= sum of d_i) over the 2^n equally likely signs e_i, which is exact for
    any n when the two runs of each trace are exchangeable (an unchanged judge). The differences
    are whole numbers (scores 1-5), so the null distribution of the sum is a convolution over
    the integers; 1 with no nonzero difference."""
    d = np.rint(np.asarray(diff, dtype=float)).astype(int)
    sizes = np.abs(d[d != 0])
    if not sizes.size:
        return 1.0
    total = int(sizes.sum())
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0  # the sum's distribution, index = sum + total
    for a in sizes:
        dist = 0.5 * (np.roll(dist, -a) + np.roll(dist, a))  # no wrap: |partial sums| <= total
    return float(min(1.0, dist[int(d.sum()) + total :].sum()))


def paired_t_p(diff: np.ndarray) -> float | None:
    """Two-sided paired-t p of mean(diff) = 0 (scipy's ttest_1samp, without its overhead: the
    simulations call it thousands of times). Differences all alike (SD 0) prove a shift when
    they are not 0 and none when they are; under MIN_PAIRED differences, None: the t
    approximation means little there, and two equal differences would "prove" a shift (p 0)."""
    n = len(diff)
    if n < MIN_PAIRED:
        return None
    sd = float(diff.std(ddof=1))
    if sd == 0:  # the exact sign-flip p: only the all-positive and all-negative flips are as far
        return 1.0 if diff[0] == 0 else min(1.0, 2.0 / 2.0**n)
    t = float(diff.mean()) / (sd / np.sqrt(n))
    return float(2 * stats.t.sf(abs(t), n - 1))


def holm(p: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values; None (untested) stays None and does not count."""
    tested = sorted((v, i) for i, v in enumerate(p) if v is not None)
    out: list[float | None] = [None] * len(p)
    running, m = 0.0, len(tested)
    for rank, (value, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * value))
        out[i] = running
    return out

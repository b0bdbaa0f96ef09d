"""Bootstrap draws of the Bias Strength Index per variant: the trials of each condition resampled
independently, vectorised. A resampled count of a 0/1 outcome is exactly Binomial(n, k/n), so
choice rows are drawn at once; numeric rows resample their values. sigma_stat (the paper's) is
the SD of |BSI| over the draws; the debiasing CIs average the draws over a strategy's variants.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import polars as pl

from orchestrator.analysis.stats import BOOTSTRAP

_CHUNK = 128  # variant rows bootstrapped at once: bounds memory at ~2 x 128 x 10,000 draws


class Cells(NamedTuple):
    """The columns of variant rows that the bootstrap reads, as arrays (read from polars once:
    a column read per small group costs more than the draws)."""

    kind: np.ndarray
    k_c: np.ndarray
    n_c: np.ndarray
    k_t: np.ndarray
    n_t: np.ndarray
    anchor: np.ndarray
    values_c: list
    values_t: list

    @classmethod
    def of(cls, rows: pl.DataFrame) -> Cells:
        column = lambda name, fill: rows[name].fill_null(fill).to_numpy()  # noqa: E731
        return cls(
            rows["kind"].to_numpy(),
            column("k_C", 0),
            column("n_C", 0),
            column("k_T", 0),
            column("n_T", 0),
            column("anchor", np.nan),
            rows["values_C"].to_list(),
            rows["values_T"].to_list(),
        )

    def take(self, index: np.ndarray | slice) -> Cells:
        rows = np.arange(len(self.kind))[index]
        return Cells(
            *(a[rows] for a in self[:6]),
            [self.values_c[i] for i in rows],
            [self.values_t[i] for i in rows],
        )


def signed_draws(cells: Cells, rng: np.random.Generator, resamples: int = BOOTSTRAP) -> np.ndarray:
    """Signed BSI of each variant row over bootstrap resamples of both conditions: (rows,
    resamples), NaN where a condition has no measured answer (choices) or fewer than two values
    (numbers)."""
    out = np.full((len(cells.kind), resamples), np.nan)
    n_c, n_t = cells.n_c, cells.n_t
    choice = np.flatnonzero((cells.kind == "choice") & (n_c > 0) & (n_t > 0))
    if len(choice):
        nc, nt = n_c[choice, None], n_t[choice, None]
        p_c = rng.binomial(nc, cells.k_c[choice, None] / nc, (len(choice), resamples)) / nc
        p_t = rng.binomial(nt, cells.k_t[choice, None] / nt, (len(choice), resamples)) / nt
        out[choice] = p_t - p_c
    for i in np.flatnonzero((cells.kind == "number") & (n_c > 1) & (n_t > 1)):
        means = []
        for values in (np.asarray(cells.values_c[i]), np.asarray(cells.values_t[i])):
            means.append(
                values[rng.integers(0, len(values), (resamples, len(values)))].mean(axis=1)
            )
        with np.errstate(divide="ignore", invalid="ignore"):
            out[i] = (means[1] - means[0]) / (cells.anchor[i] - means[0])
    return out


def bootstrap_sigma(wide: pl.DataFrame, seed: int, resamples: int = BOOTSTRAP) -> np.ndarray:
    """sigma_stat of |BSI| per variant row: the SD over resamples of both conditions."""
    rng = np.random.default_rng([seed, 1])
    cells = Cells.of(wide)
    out = np.full(wide.height, np.nan)
    for lo in range(0, wide.height, _CHUNK):
        draws = np.abs(signed_draws(cells.take(slice(lo, lo + _CHUNK)), rng, resamples))
        drawn = ~np.isnan(draws).all(axis=1)
        out[lo : lo + _CHUNK][drawn] = np.nanstd(draws[drawn], axis=1, ddof=1)
    return out

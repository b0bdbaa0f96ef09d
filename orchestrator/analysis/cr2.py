"""Cluster-robust covariance with the CR2 small-sample correction (Bell and McCaffrey 2002).

Why: with the 3-5 prompt variants a bias has, the plain sandwich (CR0) with a normal reference
called 12-17% of pure nulls significant. CR2 scales each cluster's residuals by (I - H_jj)^(-1/2),
H_jj the cluster's block of the (weighted) hat matrix, which makes the sandwich unbiased when the
working model holds; the reference is then t with the Bell-McCaffrey (Satterthwaite) degrees of
freedom, at most K - 1 and fewer when a few clusters carry most of the weight.

Inputs are per-cluster sufficient statistics, so a cluster of many answers costs a p x p matrix:
with F_j = X_j'W_jX_j = R_j'R_j and the bread M = (sum F_j)^-1, the block H_jj = Q_j G_j Q_j' with
G_j = R_j M R_j' and Q_j = W_j^(1/2) X_j R_j^-1, so X_j'W_j^(1/2) (I - H_jj)^(-1/2) e_j reduces to
R_j' (I - G_j)^(-1/2) R_j'^-1 U_j, U_j = X_j'(y_j - mu_j) the cluster's score. Checked against
the direct n x n computation in tests/test_random_effects.py.
"""

from __future__ import annotations

import numpy as np


def _inverse_power(m: np.ndarray, power: float) -> np.ndarray:
    """m^(-power) of a symmetric positive definite matrix."""
    values, vectors = np.linalg.eigh((m + m.T) / 2)
    return (vectors * values**-power) @ vectors.T


def cr2(info: np.ndarray, scores: np.ndarray, contrast: np.ndarray) -> tuple[float, float]:
    """CR2 variance of contrast'beta for a (weighted) linear or generalised linear model, with its
    Bell-McCaffrey degrees of freedom: the Satterthwaite value of that variance under the working
    model (independent answers, the model's own variances), E[V]^2 / (Var[V] / 2).

    info: (K, p, p) per-cluster information X_j'W_jX_j (W the working weights, identity for OLS);
    scores: (K, p) per-cluster X_j'(y_j - fitted_j) at the estimate. Each F_j must be positive
    definite (every cluster informs every coefficient), and K >= 2.

    The variance is sum_j (g_j'e)^2 over the weighted residuals e = (I - H) eps, eps ~ (0, I), with
    g_j = A_j X_j M c on cluster j; so df = tr(S)^2 / tr(S^2) for S = G'(I - H)G, whose entries
    need only X_j'A_jX_j = R'(I - G_j)^(-1/2)R and X_j'A_j^2X_j = R'(I - G_j)^(-1)R."""
    info, scores, c = (
        np.asarray(info, float),
        np.asarray(scores, float),
        np.asarray(contrast, float),
    )
    bread = np.linalg.inv(info.sum(0))
    mc = bread @ c
    adjusted, cross, own = [], [], []
    for f, u in zip(info, scores, strict=True):
        r = np.linalg.cholesky(f).T  # F_j = R'R, R upper triangular
        rest = np.eye(len(f)) - r @ bread @ r.T  # I - G_j
        half = _inverse_power(rest, 0.5)
        adjusted.append(mc @ r.T @ half @ np.linalg.solve(r.T, u))
        cross.append(r.T @ half @ r @ mc)
        own.append(mc @ r.T @ _inverse_power(rest, 1.0) @ r @ mc)
    cross = np.array(cross)
    s = np.diag(own) - cross @ bread @ cross.T
    return float(np.sum(np.square(adjusted))), float(np.trace(s) ** 2 / np.trace(s @ s))


def cr2_cells(
    counts: np.ndarray, sums: np.ndarray, design: np.ndarray, contrast: np.ndarray
) -> tuple[float, float, float]:
    """contrast'beta of a saturated linear model of group means (each answer's design row is
    its group's), with its CR2 variance and Bell-McCaffrey df over clusters that may hold any
    subset of the groups: (estimate, variance, df); variance and df are NaN where CR2 is
    undefined (fewer than 2 clusters, or one cluster holding all of a group's answers).

    counts, sums: (K, G) answers and the sum of their values per cluster and group; design:
    (G, G) invertible. One arrangement of `cr2_cells_many`."""
    estimate, variance, df = cr2_cells_many(
        np.asarray(counts, float)[None], np.asarray(sums, float)[None], design, contrast
    )
    return float(estimate[0]), float(variance[0]), float(df[0])


def cr2_cells_many(
    counts: np.ndarray, sums: np.ndarray, design: np.ndarray, contrast: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`cr2_cells` for R arrangements of the same clusters at once (a randomisation test
    computes the CR2 t of every relabelling): counts, sums (R, K, G); returns (R,) estimates,
    variances and df, NaN variance and df where CR2 is undefined.

    Why not `cr2`: a cluster holding one arm only (the belief study's invented-word families,
    say) has a singular X_j'X_j. Within a cluster the design rows take only G values, so every
    n_j x n_j matrix of the definition lives on the span of the group indicators: with
    R_j = diag(sqrt(n_jg)) D the hat block is Q R_j M R_j' Q' and A_j X_j M c =
    Q (I - R_j M R_j')^(-1/2) R_j M c; the rest is as in `cr2`. A group a cluster lacks has a
    zero row in R_j, which leaves I - R_j M R_j' the identity there and adds nothing."""
    counts, sums = np.asarray(counts, float), np.asarray(sums, float)
    design, c = np.asarray(design, float), np.asarray(contrast, float)
    totals = counts.sum(1)  # (R, G)
    safe = np.where(totals > 0, totals, 1.0)
    means = np.where(totals > 0, sums.sum(1) / safe, 0.0)
    estimate = means @ np.linalg.solve(design.T, c)  # c' D^-1 means
    undefined = (totals == 0).any(1) | (counts.shape[1] < 2)
    bread = np.linalg.inv(np.einsum("gi,rg,gj->rij", design, safe, design))  # (R, G, G)
    mc = bread @ c  # (R, G)
    root = np.sqrt(counts)
    r = root[..., None] * design  # (R, K, G, G): row g is sqrt(n_g) D_g
    rest = np.eye(len(design)) - r @ bread[:, None] @ np.swapaxes(r, -1, -2)
    values, vectors = np.linalg.eigh((rest + np.swapaxes(rest, -1, -2)) / 2)
    # a cluster that is all of some group has no residual to scale: CR2 is undefined
    undefined |= (values < 1e-12).any((1, 2))
    values = np.where(values < 1e-12, 1.0, values)
    half = (vectors * values[..., None, :] ** -0.5) @ np.swapaxes(vectors, -1, -2)
    beta = np.einsum("rkij,rkj->rki", half, np.einsum("rkij,rj->rki", r, mc))
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = np.where(counts > 0, (sums - counts * means[:, None]) / root, 0.0)
    adjusted = (beta * residual).sum(-1)  # (R, K)
    crossed = np.einsum("rkji,rkj->rki", r, beta)  # R_j' beta_j
    own = (beta * beta).sum(-1)
    shape = np.einsum("rk,kl->rkl", own, np.eye(counts.shape[1])) - crossed @ bread @ np.swapaxes(
        crossed, -1, -2
    )
    variance = (adjusted**2).sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.trace(shape, axis1=1, axis2=2) ** 2 / (shape * shape).sum((1, 2))
    return (
        estimate,
        np.where(undefined, np.nan, variance),
        np.where(undefined, np.nan, df),
    )

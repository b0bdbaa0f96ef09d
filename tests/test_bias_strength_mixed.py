"""The 11-bias study's trial-level models (mixed.py) test whether an effect generalises across
prompt variants: their false-positive rate when the effect differs by variant around 0, the robust
check's with 3-5 variants, their power for a common effect, the normalisation of numeric answers,
and Benjamini-Hochberg on the model's p-values."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.multitest import multipletests

from orchestrator.report.plots import plt
from orchestrator.studies.bias_strength.inference import bias_summary
from orchestrator.studies.bias_strength.mixed import choice_models, numeric_models
from orchestrator.studies.bias_strength.plots import heatmap_figure

K_RANGE = (
    3,
    4,
    5,
)  # variants per bias in jobs/bias-strength.json (K_PER_BIAS in test_bias_strength.py)
REPS = 800  # binomial SE 0.8% at a true 5%, 1.1% at 10%: a bound of 8% tells them apart


def numeric_part(rng: np.random.Generator, k: int, tau: float, effect: float) -> pl.DataFrame:
    """K anchoring-like variants on scales from 100 to 10,000, anchors above or below the control
    mean, 20-100 answers per cell; the normalised shift of variant j is effect + N(0, tau^2)."""
    rows = []
    for j in range(k):
        mu = 100 * 10 ** rng.uniform(0, 2)
        anchor = mu * (rng.uniform(1.5, 4) if rng.random() < 0.5 else rng.uniform(0.2, 0.6))
        shift = effect + rng.normal(0, tau)
        n_c, n_t = rng.integers(20, 101, 2)
        sd = mu * rng.uniform(0.2, 0.5)
        rows.append(
            {
                "variant": f"v{j}",
                "anchor": float(anchor),
                "values_C": rng.normal(mu, sd, n_c).tolist(),
                "values_T": rng.normal(mu + shift * (anchor - mu), sd, n_t).tolist(),
            }
        )
    return pl.DataFrame(rows)


def choice_part(rng: np.random.Generator, k: int, tau: float, effect: float) -> pl.DataFrame:
    """K variants with baseline log-odds N(-0.3, 1) and log odds ratio effect + N(0, tau^2); 20-100
    answers per variant, the same in both conditions (as the job plans them)."""
    base, log_or = rng.normal(-0.3, 1.0, k), effect + rng.normal(0, tau, k)
    n = np.repeat(rng.integers(20, 101, (k, 1)), 2, axis=1)
    s = rng.binomial(n, 1 / (1 + np.exp(-(base[:, None] + np.column_stack([np.zeros(k), log_or])))))
    return pl.DataFrame(
        {
            "variant": [f"v{j}" for j in range(k)],
            "k_C": s[:, 0],
            "n_C": n[:, 0],
            "k_T": s[:, 1],
            "n_T": n[:, 1],
        }
    )


MODELS = {"numeric": (numeric_part, numeric_models), "choice": (choice_part, choice_models)}


def rejection_rates(
    kind: str, tau: float, effect: float, reps: int, seed: int, ks: tuple[int, ...] = K_RANGE
) -> tuple[float, float]:
    """Share of simulated biases the mixed model and the robust check call significant at 5%. A
    bias whose variants all show one identical shift has no test (p is NaN): not significant."""
    make, model = MODELS[kind]
    rng = np.random.default_rng(seed)
    fits = [model(make(rng, ks[i % len(ks)], tau, effect)) for i in range(reps)]
    untested = np.mean([np.isnan(f["mixed_p"]) or np.isnan(f["robust_p"]) for f in fits])
    assert untested <= 0.01, f"{untested:.1%} of fits gave no test"
    return float(np.mean([f["mixed_p"] < 0.05 for f in fits])), float(
        np.mean([f["robust_p"] < 0.05 for f in fits])
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "tau"),
    [
        ("numeric", 0.15),  # normalised shifts of the variants spread with SD 0.15 around 0
        ("choice", 1.0),  # log odds ratios spread with SD 1 around 0
        ("numeric", 0.0),  # pure nulls: the robust check alone has 3-5 clusters to go on
        ("choice", 0.0),
    ],
    ids=["numeric-differing", "choice-differing", "numeric-pure", "choice-pure"],
)
def test_nulls_are_called_significant_at_most_at_the_nominal_rate(kind, tau):
    mixed, robust = rejection_rates(kind, tau, 0.0, REPS, seed=12)
    assert mixed <= 0.08, f"the mixed model called {mixed:.1%} of nulls significant"
    assert robust <= 0.08, f"the robust check called {robust:.1%} of nulls significant"


@pytest.mark.parametrize(("kind", "effect"), [("numeric", 0.25), ("choice", 1.2)])
def test_an_effect_common_to_every_variant_is_found(kind, effect):
    # a normalised shift of 0.25, an odds ratio of 3.3, in every one of 4-5 variants (with 3 the
    # t reference has 2 degrees of freedom and power is lower: about 0.73 and 0.54)
    mixed, robust = rejection_rates(kind, 0.0, effect, 200, seed=13, ks=(4, 5))
    assert mixed >= 0.85 and robust >= 0.85, (mixed, robust)


def _summary_rows(rows: list[dict]) -> pl.DataFrame:
    """A hand-made variant table in the shape bias_summary reads (one row per variant)."""
    base = {
        "modelKey": "m",
        "model": "sim/m",
        "strategy": "baseline",
        "bias": "b",
        "sigma_stat": 0.1,
        "anchor": None,
        "values_C": None,
        "values_T": None,
        "k_C": None,
        "n_C": None,
        "k_T": None,
        "n_T": None,
    }
    return pl.DataFrame([base | r for r in rows], infer_schema_length=None)


def test_numeric_answers_are_normalised_per_variant_before_pooling():
    # a planted BSI of 0.25 on two very different scales: 10 -> 35 towards an anchor of 110, and
    # 100,000 -> 80,000 towards an anchor of 20,000; raw values would pool shifts of +25 and -20,000
    rng = np.random.default_rng(4)
    rows = []
    for v, (mu, anchor) in enumerate([(10.0, 110.0), (1e5, 2e4), (300.0, 500.0)]):
        control = rng.normal(mu, 0.01 * abs(anchor - mu), 50)
        mean_c = control.mean()
        treated = rng.normal(mean_c + 0.25 * (anchor - mean_c), 0.01 * abs(anchor - mu), 50)
        bsi = (treated.mean() - mean_c) / (anchor - mean_c)
        rows.append(
            {
                "experimentSlug": "anchoring",
                "kind": "number",
                "variant": f"v{v}",
                "anchor": anchor,
                "values_C": control.tolist(),
                "values_T": treated.tolist(),
                "bsi_signed": bsi,
                "bsi": abs(bsi),
            }
        )
    [row] = bias_summary(_summary_rows(rows)).iter_rows(named=True)
    assert row["mixed_effect"] == pytest.approx(0.25, abs=0.005)
    assert row["robust_effect"] == pytest.approx(0.25, abs=0.005)
    assert row["mixed_p"] < 0.01


def test_mixed_model_p_values_are_benjamini_hochberg_adjusted_within_each_strategy():
    rng = np.random.default_rng(8)
    rows = []
    for strategy, scale in (("baseline", 1.0), ("cot", 0.4)):
        for b, log_or in enumerate([0.0, 0.3, 0.6, 0.9, 1.2, 1.5]):
            for v in range(4 if b else 1):  # bias 0 has one variant: untestable, left out of BH
                n = 60
                p_c = 1 / (1 + np.exp(-rng.normal(-0.3, 0.5)))
                p_t = 1 / (
                    1 + np.exp(-(np.log(p_c / (1 - p_c)) + scale * log_or + rng.normal(0, 0.3)))
                )
                k_c, k_t = int(rng.binomial(n, p_c)), int(rng.binomial(n, p_t))
                rows.append(
                    {
                        "strategy": strategy,
                        "experimentSlug": f"b{b}",
                        "kind": "choice",
                        "variant": f"v{v}",
                        "k_C": k_c,
                        "n_C": n,
                        "k_T": k_t,
                        "n_T": n,
                        "bsi_signed": (k_t - k_c) / n,
                        "bsi": abs(k_t - k_c) / n,
                    }
                )
    summary = bias_summary(_summary_rows(rows))
    for strategy in ("baseline", "cot"):
        part = summary.filter(pl.col("strategy") == strategy)
        p, q = part["mixed_p"].to_numpy(), part["q_mixed"].to_numpy()
        untestable = part["mixed_p"].is_null().to_numpy()
        assert untestable.sum() == 1 and part["q_mixed"].is_null().to_numpy()[untestable].all()
        expected = multipletests(p[~untestable], method="fdr_bh")[1]
        assert q[~untestable] == pytest.approx(expected, rel=1e-12)
        assert not np.allclose(expected, p[~untestable])  # the adjustment changes something here
        assert (
            part["significant_mixed"].fill_null(False).to_numpy()
            == (np.nan_to_num(q, nan=1) < 0.05)
        ).all()


def _choice_rows(slug: str, cells: list[tuple[int, int, int, int]]) -> list[dict]:
    return [
        {
            "experimentSlug": slug,
            "kind": "choice",
            "variant": f"v{j}",
            "k_C": kc,
            "n_C": nc,
            "k_T": kt,
            "n_T": nt,
            "bsi_signed": kt / nt - kc / nc,
            "bsi": abs(kt / nt - kc / nc),
        }
        for j, (kc, nc, kt, nt) in enumerate(cells)
    ]


def test_an_effect_identical_in_every_variant_reads_as_consistent_and_untestable():
    """A model at T=0 that goes 0% -> 100% in every variant (cells of 20-40 answers), one that
    echoes every anchor, and one that never moves: nothing varies between variants, so there is
    no test of generalisation, and no p-value from the spread the 0.5 added to the cells leaves."""
    numeric = [
        {
            "experimentSlug": "echo",
            "kind": "number",
            "variant": f"v{j}",
            "anchor": anchor,
            "values_C": [mu] * 10,
            "values_T": [anchor] * 10,
            "bsi_signed": 1.0,
            "bsi": 1.0,
        }
        for j, (mu, anchor) in enumerate([(100.0, 400.0), (50.0, 10.0), (7.0, 70.0)])
    ]
    rows = (
        _choice_rows("flip", [(0, 20, 20, 20), (0, 40, 40, 40), (0, 30, 30, 30), (0, 20, 20, 20)])
        + _choice_rows("against", [(20, 20, 0, 20)] * 3)
        + _choice_rows("still", [(5, 20, 5, 20), (10, 40, 10, 40)])
        + numeric
    )
    summary = bias_summary(_summary_rows(rows))
    by = {r["experimentSlug"]: r for r in summary.iter_rows(named=True)}
    expected = {
        "flip": "identical effect in all 4 variants: no test of generalisation is possible; consistent "
        "in sign (all in the predicted direction)",
        "against": "identical effect in all 3 variants: no test of generalisation is possible; "
        "consistent in sign (all against the prediction)",
        "still": "no effect in any of the 2 variants (identical in all): no test of generalisation is possible",
        "echo": "identical effect in all 3 variants: no test of generalisation is possible; consistent "
        "in sign (all in the predicted direction)",
    }
    for slug, reason in expected.items():
        r = by[slug]
        assert r["reason"] == reason and r["identical_effect"]
        assert all(
            r[c] is None for c in ("mixed_p", "q_mixed", "p_variant", "q_variant", "robust_p")
        ), slug
        assert not r["significant_mixed"] and not r["significant_variant"]
        assert r["mixed_tau"] == 0.0 and r["sigma_sys"] == 0.0
    fig = heatmap_figure(summary)
    cells = {t.get_gid(): t.get_text() for t in fig.axes[0].texts if t.get_gid()}
    assert cells["bsi-cell flip m"] == "1.00=" and cells["bsi-cell against m"] == "-1.00="
    plt.close(fig)


def test_a_signed_bsi_identical_in_every_variant_gets_no_t_test_from_rounding_error():
    """Three variants move 0.1 each from different starting shares: their signed BSI differ only in
    the last bits (2.4e-17), which a t-test reads as certainty; the odds ratios do differ, so the
    mixed model still tests them."""
    rows = _choice_rows("b", [(3, 20, 5, 20), (6, 20, 8, 20), (1, 20, 3, 20)])
    assert np.ptp([r["bsi_signed"] for r in rows]) > 0  # the rounding the t-test must not trust
    [r] = bias_summary(_summary_rows(rows)).iter_rows(named=True)
    assert r["p_variant"] is None and r["t_stat"] is None
    assert "identical signed BSI in all 3 variants: no variant t-test" in r["sigma_note"]
    assert not r["identical_effect"] and 0 < r["mixed_p"] < 1

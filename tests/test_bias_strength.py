"""The 11-bias study's method (seed 001): BSI, its uncertainties, tests, counterbalancing."""

from __future__ import annotations

from collections import Counter

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats

from orchestrator.analysis.stats import bh
from orchestrator.analysis.summary import analyze
from orchestrator.plan import option_orders
from orchestrator.report.plots import plt
from orchestrator.session import load_job
from orchestrator.studies.bias_strength.inference import bias_summary
from orchestrator.studies.bias_strength.plots import heatmap_figure
from orchestrator.studies.bias_strength.report import _bsi_rows
from tests.conftest import ROOT, run_quietly, write_config

FIXTURE = ROOT / "tests" / "data" / "three-biases.json"
K_PER_BIAS = {
    "anchoring": 5,
    "availability": 4,
    "representativeness": 4,
    "framing": 5,
    "sunk-cost": 4,
    "status-quo": 3,
    "decoy": 4,
    "confirmation": 5,
    "bandwagon": 4,
    "authority": 4,
    "primacy-recency": 3,
}


def test_the_built_in_job_has_the_papers_biases_and_variants():
    job = load_job(ROOT / "jobs" / "bias-strength.json")
    assert {e.slug: len(e.conditions[0].variants) for e in job.experiments} == K_PER_BIAS
    assert [s.id for s in job.strategies] == ["baseline", "cot", "warning", "analyst"]
    domains = Counter(v.domain for e in job.experiments for v in e.conditions[0].variants)
    assert set(domains) == {"medical", "financial", "social", "technical"}
    for e in job.experiments:
        for control, treatment in zip(
            e.conditions[0].variants, e.conditions[1].variants, strict=True
        ):
            assert control.id == treatment.id
            if treatment.contract.kind == "choice":
                assert treatment.predicted in treatment.contract.roles
            else:
                assert (
                    treatment.anchor is not None
                    and str(int(treatment.anchor)) not in control.prompt
                )


def test_options_are_shown_in_every_order_and_scored_by_role(tmp_path):
    assert option_orders(2) == [(0, 1), (1, 0)] and len(option_orders(3)) == 6
    square = option_orders(4)
    assert all(sorted(col) == [0, 1, 2, 3] for col in zip(*square, strict=True))  # Latin square
    cfg = write_config(
        tmp_path,
        f"""
        name = "order"
        jobs = ["{FIXTURE}"]
        samples = 40
        strategies = ["baseline"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "first-picker"
        [models.simulate]
        first_position_bias = 0.8
        """,
    )
    outcome = run_quietly(cfg)
    records = [
        orjson.loads(line)
        for line in (outcome.run_dir / "results.ndjson").read_bytes().splitlines()
    ]
    choices = [r for r in records if r["optionOrder"]]
    orders = Counter((r["variant"], r["conditionIndex"], tuple(r["optionOrder"])) for r in choices)
    assert set(orders.values()) == {20}  # 40 samples: 20 in each of the two orders
    # A respondent that mostly picks whatever is listed first shows no bias once orders balance.
    summary = analyze(outcome.run_dir).tables["bsi_summary"]
    none = summary.filter(pl.col("experimentSlug") == "none").row(0, named=True)
    assert abs(none["bsi_signed"]) < 0.1
    assert all(r["response"]["role"] in ("yes", "no") for r in choices if r["status"] == "ok")


def _variant_rows(rows):
    """Hand-made variant table: (variant, kC, nC, kT, nT) for one choice bias."""
    return pl.DataFrame(
        [
            {
                "modelKey": "m",
                "model": "sim/m",
                "strategy": "baseline",
                "experimentSlug": "b",
                "bias": "b",
                "kind": "choice",
                "variant": v,
                "k_C": kc,
                "n_C": nc,
                "k_T": kt,
                "n_T": nt,
                "bsi_signed": kt / nt - kc / nc,
                "bsi": abs(kt / nt - kc / nc),
                "sigma_stat": 0.1,
                "anchor": None,
                "values_C": None,
                "values_T": None,
            }
            for v, kc, nc, kt, nt in rows
        ]
    )


def test_bias_strength_sigma_sys_and_the_variant_t_test_by_hand():
    table = _variant_rows([("v1", 10, 20, 16, 20), ("v2", 5, 20, 9, 20), ("v3", 8, 20, 6, 20)])
    [row] = bias_summary(table).iter_rows(named=True)
    assert row["bsi"] == pytest.approx((0.3 + 0.2 + 0.1) / 3)  # |0.3|, |0.2|, |-0.1|
    assert row["sigma_sys"] == pytest.approx(0.1)  # SD of 0.3, 0.2, 0.1
    assert row["sigma_tot"] == pytest.approx(np.sqrt(0.1**2 + 0.1**2))
    assert row["bsi_signed"] == pytest.approx(0.4 / 3)
    ref = stats.ttest_1samp([0.3, 0.2, -0.1], 0.0)
    assert (row["t_stat"], row["p_variant"]) == (
        pytest.approx(ref.statistic),
        pytest.approx(ref.pvalue),
    )
    assert row["odds_ratio"] > 1 and row["K"] == 3


def test_rounding_error_shows_as_0_not_as_4e_17():
    """The SD of three equal |BSI| of 0.1 is 1.7e-17 in floating point, the mean of 0, 0.15 and
    -0.15 is -9.3e-18: the summary, the report's table and the heatmap show 0."""
    flat = _variant_rows([("v1", 2, 20, 4, 20)] * 3)
    zero = _variant_rows([("v1", 6, 20, 6, 20), ("v2", 0, 20, 3, 20), ("v3", 9, 20, 6, 20)])
    assert (
        np.std(flat["bsi"].to_numpy(), ddof=1) > 0 and zero["bsi_signed"].mean() != 0
    )  # what is rounded
    summary = bias_summary(pl.concat([flat, zero.with_columns(experimentSlug=pl.lit("z"))]))
    by = {r["experimentSlug"]: r for r in summary.iter_rows(named=True)}
    assert by["b"]["sigma_sys"] == 0.0 and by["z"]["bsi_signed"] == 0.0
    assert not str(by["z"]["bsi_signed"]).startswith("-")  # not -0.0 either
    rows = {r["bias"]: r for r in _bsi_rows(summary)}
    assert rows["b"]["σ_stat / σ_sys"] == "0.1 / 0" and rows["z"]["signed BSI"] == "0"
    fig = heatmap_figure(summary)
    assert {t.get_gid(): t.get_text() for t in fig.axes[0].texts}["bsi-cell z m"] == "0.00"
    plt.close(fig)
    # a small real value is no -0.00 either: it keeps a digit
    small = _variant_rows([("v1", 10, 20, 10, 20), ("v2", 500, 1000, 499, 1000)])
    fig = heatmap_figure(bias_summary(small))
    assert {t.get_gid(): t.get_text() for t in fig.axes[0].texts}["bsi-cell b m"] == "-0.0005"
    plt.close(fig)


def test_benjamini_hochberg_matches_statsmodels_and_skips_untestable():
    from statsmodels.stats.multitest import multipletests

    p = np.array([0.01, np.nan, 0.04, 0.03, 0.2])
    q = bh(p)
    assert np.isnan(q[1])
    assert q[~np.isnan(p)] == pytest.approx(multipletests(p[~np.isnan(p)], method="fdr_bh")[1])


def test_bootstrap_sigma_stat_matches_the_binomial_standard_error(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "sigma"
        jobs = ["{FIXTURE}"]
        samples = 200
        strategies = ["baseline"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        [models.simulate.effects.everywhere]
        conditions = [{{shares = {{yes = 0.3}}}}, {{shares = {{yes = 0.7}}}}]
        """,
    )
    outcome = run_quietly(cfg)
    variants = (
        analyze(outcome.run_dir)
        .tables["bsi_variants"]
        .filter(pl.col("experimentSlug") == "everywhere")
    )
    for r in variants.iter_rows(named=True):
        p_c, p_t = r["stat_C"], r["stat_T"]
        analytic = np.sqrt(p_c * (1 - p_c) / r["n_C"] + p_t * (1 - p_t) / r["n_T"])
        assert r["sigma_stat"] == pytest.approx(analytic, rel=0.05)  # |BSI| far from 0: same SD


def _replications(tmp_path, n: int):
    shares = lambda p: f"{{shares = {{yes = {p}}}}}"  # noqa: E731
    models = "".join(
        f"""
[[models]]
provider = "simulated"
name = "rep"
[models.simulate]
seed = {i}
[models.simulate.effects.everywhere]
conditions = [{shares(0.3)}, {shares(0.6)}]
[models.simulate.effects.some.variants]
s1 = [{shares(0.3)}, {shares(0.8)}]
s2 = [{shares(0.3)}, {shares(0.8)}]
[models.simulate.effects.anchoring]
conditions = [{{mean = 100, sd = 30}}, {{mean = 300, sd = 30}}]
"""
        for i in range(n)
    )
    cfg = write_config(
        tmp_path,
        f"""
name = "planted"
jobs = ["{FIXTURE}"]
samples = 100
strategies = ["baseline"]
output_dir = "{tmp_path / "runs"}"
[limits.simulated]
max_in_flight = 64
{models}""",
    )
    return run_quietly(cfg)


@pytest.mark.slow
def test_planted_biases_are_recovered_and_a_bias_planted_nowhere_is_not_called(tmp_path):
    outcome = _replications(tmp_path, 60)
    summary = analyze(outcome.run_dir).tables["bsi_summary"]
    by_bias = {
        b: summary.filter(pl.col("experimentSlug") == b)
        for b in ("everywhere", "some", "none", "anchoring")
    }
    none = by_bias["none"]
    false_calls = (
        none["significant_variant"].fill_null(False) | none["significant_mixed"].fill_null(False)
    ).mean()
    assert false_calls <= 0.05, (
        f"the unplanted bias was called significant in {false_calls:.0%} of replications"
    )
    # planted in half the variants: large systematic uncertainty, larger than everywhere's
    assert by_bias["some"]["sigma_sys"].median() > 2 * by_bias["everywhere"]["sigma_sys"].median()
    assert by_bias["some"]["sigma_sys"].median() > by_bias["some"]["sigma_stat"].median()
    assert by_bias["everywhere"]["bsi"].mean() == pytest.approx(0.3, abs=0.03)
    assert by_bias["everywhere"]["significant_mixed"].mean() >= 0.9
    # anchoring: 100 -> 300 against anchors 900/1900/2900 -> BSI 0.25, 0.111, 0.071
    assert by_bias["anchoring"]["bsi"].mean() == pytest.approx(
        np.mean([200 / 800, 200 / 1800, 200 / 2800]), rel=0.05
    )

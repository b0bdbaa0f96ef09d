"""Power planning for the bias-strength study (its power.py): the t-test over variants with
Benjamini-Hochberg across bias x model tests, planned on the shipped job, its defaults, the
T=0 and few-variant messages, pilot estimation, and (slow) a simulation through the study's
own bias_summary at the reported MDE."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from orchestrator.analysis.load import open_run
from orchestrator.analysis.power import Target, assess, bh_level, mde
from orchestrator.cli.run import load_target
from orchestrator.plan import Plan
from orchestrator.studies.bias_strength.inference import bias_summary
from orchestrator.studies.bias_strength.power import (
    Spread,
    pilot_spread,
    power,
    small_k,
    variant_design,
    variant_effects,
    within,
)
from tests.conftest import run_quietly, write_config
from tests.test_bias_strength import FIXTURE, K_PER_BIAS
from tests.test_bias_strength_mixed import _summary_rows


def _plan(tmp_path: Path, models: str, samples: int = 100, strategies=("baseline",)):
    cfg = write_config(
        tmp_path,
        f"""
        name = "p"
        jobs = ["bias-strength"]
        samples = {samples}
        strategies = {list(strategies)!r}
        {models}
        """.replace("'", '"'),
    )
    return Plan(load_target(cfg, None, None, None, None, None))


WARM = '[[models]]\nprovider = "simulated"\nname = "warm"\ntemperature = 0.7\n'
COLD = '[[models]]\nprovider = "simulated"\nname = "cold"\ntemperature = 0\n'


def _choice_mde(k: int, n: int, level: float, tau: float = 0.1) -> float:
    """The default choice design by hand: e = (t + t_0.8 * stretch) * se(e), shares at 1/2 -+ e/2."""
    multiplier = stats.t.ppf(1 - level / 2, k - 1) + stats.t.ppf(0.8, k - 1) * small_k(k - 1, level)
    e = 0.3
    for _ in range(200):  # damped: the plain iteration oscillates at multipliers near 10
        new = multiplier * math.sqrt((tau**2 + max(0.5 - (e**2 + tau**2) / 2, 0) / n) / k)
        e = (e + new) / 2
    return e


def test_the_shipped_job_is_planned_per_bias_over_its_variants_with_bh_across_biases(tmp_path):
    rows = power(_plan(tmp_path, WARM), None, 0.05)
    assert {r.experiment: r.units for r in rows} == K_PER_BIAS
    level = bh_level(0.05, 11)
    for r in rows:
        assert (r.unit, r.samples, r.alpha, r.study) == ("variants", 100, level, "bias-strength")
        assert "Benjamini-Hochberg over 11 bias x model tests" in r.correction
        assert r.variance.startswith("default")
        found = mde(r.design, r.samples, r.alpha, 0.8)
        if r.experiment == "anchoring":
            assert r.scale == "of the distance to the anchor" and 0.3 < found < 0.6
        else:
            assert r.scale == "share"
            assert found == pytest.approx(_choice_mde(r.units, 100, level), rel=1e-6)
    by = {r.experiment: r for r in rows}
    assert "above 1" in by["status-quo"].note and not by["framing"].note  # 3 variants: none


def test_choice_variants_count_their_samples_over_option_orders(tmp_path):
    # 10 samples split over the option orders (5 + 5 for two options, 2,2,2,2,1,1 for three)
    rows = power(_plan(tmp_path, WARM, samples=10, strategies=("baseline", "cot")), None, 0.05)
    assert {r.samples for r in rows} == {10}
    assert {r.alpha for r in rows} == {0.05 / 11}  # BH runs per strategy: 11 tests each
    assert "(baseline, cot)" in rows[0].correction


def test_two_models_double_the_tests_bh_runs_over(tmp_path):
    rows = power(_plan(tmp_path, WARM + COLD), None, 0.05)
    assert len(rows) == 22 and {r.alpha for r in rows} == {0.05 / 22}


def test_the_noncentral_t_mde_has_the_planned_power():
    for k, level in ((3, 0.05), (4, 0.05 / 11), (5, 0.05 / 88)):
        design = variant_design(k, Spread(0.1, 0.25, 0.25, "choice"), level)
        prec = design(100, 0.0)
        found = mde(design, 100, level, 0.8)
        crit = stats.t.ppf(1 - level / 2, k - 1)
        assert stats.nct.sf(crit, k - 1, found / prec.se_test) == pytest.approx(0.8, abs=1e-6)
        # and the normal formula's MDE would have fallen short of it
        assert found > (crit + stats.t.ppf(0.8, k - 1)) * prec.se_test


def test_defaults_and_the_floor_only_more_variants_lower():
    level = 0.05 / 11
    choice = variant_design(5, Spread(0.1, 0.25, 0.25, "choice", centred=True), level)
    assert choice(10, 0.0).se_test > choice(100, 0.0).se_test > choice(10**6, 0.0).se_test
    floor = mde(choice, 10**6, level, 0.8)  # tau alone: (t + t_0.8 stretch) * 0.1 / sqrt(5)
    multiplier = stats.t.ppf(1 - level / 2, 4) + stats.t.ppf(0.8, 4) * small_k(4, level)
    assert floor == pytest.approx(multiplier * 0.1 / math.sqrt(5), rel=1e-4)
    # a number's control mean sits in the BSI's denominator: its noise falls with the effect
    number = Spread(0.0, 0.25, 0.25, "number")
    assert within(number, 0.0) == 0.5 and within(number, 0.5) == pytest.approx(0.3125)
    assert within(number, 2.0) == within(number, 1.0) == 0.25  # past the anchor: no noisier
    # the design answers at its own MDE, whatever effect it is asked at (no oscillation)
    assert choice(100, 0.0) == choice(100, 0.7)


def test_a_deterministic_model_gets_no_gain_from_samples(tmp_path):
    rows = [r for r in power(_plan(tmp_path, COLD), None, 0.05) if r.experiment == "framing"]
    [row] = rows
    assert row.note.startswith("T=0") and "only more variants" in row.note
    found = assess(row, Target())
    assert found["mde"] == found["floor"] and not found["more_samples_help"]
    # one draw per option order (2 orders): the noise of 2 answers whatever the samples
    assert row.design(100, 0.0) == row.design(10**6, 0.0)


def _cells(rng, k: int, tau: float, p: float, n: int, effect: float = 0.2, models=("m",)):
    """cell_counts-shaped rows of `k` choice variants with true effects effect + N(0, tau^2)
    at control share p (item effect: the share, shared by both conditions)."""
    rows = []
    for model in models:
        for j in range(k):
            d = effect + rng.normal(0, tau)
            for c, share in ((0, p), (1, p + d)):
                rows.append(
                    {
                        "modelKey": model,
                        "strategy": "baseline",
                        "experimentSlug": "b",
                        "variant": f"v{j}",
                        "conditionIndex": c,
                        "n": n,
                        "k": int(rng.binomial(n, min(max(share, 0), 1))),
                        "mean": None,
                        "values": None,
                    }
                )
    cells = pl.DataFrame(
        rows,
        schema_overrides={"mean": pl.Float64, "values": pl.List(pl.Float64)},
    )
    variants = pl.DataFrame(
        {"experimentSlug": "b", "variant": [f"v{j}" for j in range(k)], "kind": "choice"}
    ).with_columns(anchor=pl.lit(None, pl.Float64))
    return cells, variants


def test_pilot_recovers_the_variants_spread_and_the_answer_variance():
    rng = np.random.default_rng(3)
    cells, variants = _cells(rng, 400, tau=0.12, p=0.3, n=200)
    effects = variant_effects(cells, variants)
    spread, said = pilot_spread(effects, "b", "m", "choice")
    assert spread.tau == pytest.approx(0.12, abs=0.012)
    assert spread.var_c == pytest.approx(0.21, abs=0.01)  # 0.3 x 0.7
    assert spread.var_t == pytest.approx(0.25 - 0.12**2, abs=0.01)  # shares 0.5 + N(0, 0.12^2)
    assert "pooled over 1 choice groups" in said and "models pooled" not in said
    # a model the pilot did not run: its figures pooled over the pilot's models, and said so
    spread_other, said_other = pilot_spread(effects, "b", "other", "choice")
    assert spread_other == spread and "models pooled" in said_other
    assert pilot_spread(effects, "absent", "m", "choice") is None


def test_pilot_numbers_are_measured_in_anchor_distances():
    rng = np.random.default_rng(4)
    rows, kinds = [], []
    for j in range(300):
        mu = 100 * 10 ** rng.uniform(0, 2)
        anchor = mu * 3
        shift = 0.2 + rng.normal(0, 0.1)
        for c, mean in ((0, mu), (1, mu + shift * (anchor - mu))):
            values = rng.normal(mean, 0.4 * (anchor - mu), 80)
            rows.append(
                {
                    "modelKey": "m",
                    "strategy": "baseline",
                    "experimentSlug": "anchoring",
                    "variant": f"v{j}",
                    "conditionIndex": c,
                    "n": 80,
                    "k": 0,
                    "mean": float(values.mean()),
                    "values": values.tolist(),
                }
            )
        kinds.append(
            {"experimentSlug": "anchoring", "variant": f"v{j}", "kind": "number", "anchor": anchor}
        )
    effects = variant_effects(pl.DataFrame(rows), pl.DataFrame(kinds))
    spread, _ = pilot_spread(effects, "anchoring", "m", "number")
    assert spread.var_c == pytest.approx(0.16, rel=0.1) and spread.var_t == pytest.approx(
        0.16, rel=0.1
    )
    assert spread.tau == pytest.approx(0.1, abs=0.015)


def test_a_pilot_run_gives_the_variances(tmp_path):
    shares = lambda p: f"{{shares = {{yes = {p}}}}}"  # noqa: E731
    cfg = write_config(
        tmp_path,
        f"""
        name = "pilot"
        jobs = ["{FIXTURE}"]
        samples = 30
        strategies = ["baseline"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        [models.simulate.effects.everywhere]
        conditions = [{shares(0.3)}, {shares(0.6)}]
        [models.simulate.effects.some.variants]
        s1 = [{shares(0.3)}, {shares(0.9)}]
        s2 = [{shares(0.3)}, {shares(0.9)}]
        """,
    )
    pilot = open_run(run_quietly(cfg).run_dir)
    plan = Plan(load_target(cfg, None, None, None, None, None))
    rows = {r.experiment: r for r in power(plan, pilot, 0.05)}
    assert set(rows) == {"everywhere", "some", "none", "anchoring"}
    assert all(r.variance.startswith(f"pilot {pilot.path.name}: ") for r in rows.values())
    assert "in BSI units over 4 variant x strategy cells" in rows["everywhere"].variance
    # the pilot's spread ('some' moves in two variants of four) widens the MDE past the default
    default = {r.experiment: r for r in power(plan, None, 0.05)}
    assert mde(rows["some"].design, 30, rows["some"].alpha, 0.8) > mde(
        default["some"].design, 30, default["some"].alpha, 0.8
    )


# The simulation: an item-clustered respondent (each variant has its own baseline, shared by
# both conditions, and its own effect, effect + N(0, tau^2)), answering the 11 biases of the
# shipped job (K per bias as there) on one model, so Benjamini-Hochberg runs over 11 tests as
# in a real campaign. One bias carries the planted effect, the others none. Each seed is a
# strategy of its own: bias_summary corrects within each strategy, so one call runs them all.
SEEDS = 400
SHARE_CENTRES = 0.1  # variants' control shares 0.5 + U(-0.1, 0.1), shared by both conditions
RATIO = (0.3, 0.6)  # a number's answer SD, in distances to the anchor, U(0.3, 0.6) per variant


def _variants(rng, kind: str, k: int, effect: float, tau: float, n: int) -> list[dict]:
    d = effect + rng.normal(0, tau, k)  # each variant's own true effect
    if kind == "choice":
        centre = 0.5 + rng.uniform(-SHARE_CENTRES, SHARE_CENTRES, k)
        p_c, p_t = np.clip(centre - d / 2, 0, 1), np.clip(centre + d / 2, 0, 1)
        k_c, k_t = rng.binomial(n, p_c), rng.binomial(n, p_t)
        return [
            {"kind": "choice", "k_C": int(a), "n_C": n, "k_T": int(b), "n_T": n}
            for a, b in zip(k_c, k_t, strict=True)
        ]
    rows = []
    for j in range(k):
        mu = 100 * 10 ** rng.uniform(0, 2)  # each variant on its own scale
        anchor = mu * (rng.uniform(1.5, 4) if rng.random() < 0.5 else rng.uniform(0.2, 0.6))
        sd = rng.uniform(*RATIO) * abs(anchor - mu)
        rows.append(
            {
                "kind": "number",
                "anchor": float(anchor),
                "values_C": rng.normal(mu, sd, n).tolist(),
                "values_T": rng.normal(mu + d[j] * (anchor - mu), sd, n).tolist(),
            }
        )
    return rows


def _campaigns(planted: str | None, effect: float, tau: float, n: int, seed: int):
    """The study's own bias_summary over SEEDS replications of the 11-bias campaign."""
    from orchestrator.studies.bias_strength.analysis import _signed

    rng = np.random.default_rng(seed)
    rows = []
    for s in range(SEEDS):
        for bias, k in K_PER_BIAS.items():
            kind = "number" if bias == "anchoring" else "choice"
            size = effect if bias == planted else 0.0
            for j, row in enumerate(_variants(rng, kind, k, size, tau, n)):
                if kind == "choice":
                    stat_c, stat_t, anchor = row["k_C"] / n, row["k_T"] / n, np.nan
                else:
                    stat_c, stat_t = np.mean(row["values_C"]), np.mean(row["values_T"])
                    anchor = row["anchor"]
                signed = float(
                    _signed(np.array([kind]), np.array([stat_c]), np.array([stat_t]), anchor)[0]
                )
                rows.append(
                    row
                    | {
                        "strategy": f"s{s}",
                        "experimentSlug": bias,
                        "variant": f"v{j}",
                        "bsi_signed": signed,
                        "bsi": abs(signed),
                    }
                )
    return bias_summary(_summary_rows(rows))


def _planned_mde(kind: str, k: int, tau: float, n: int) -> float:
    """The MDE power.py reports for the respondent's known figures, through its design."""
    if kind == "choice":  # E[p(1 - p)] at shares 0.5 + U(-a, a): 1/4 - a^2 / 3
        var = 0.25 - SHARE_CENTRES**2 / 3
        spread = Spread(tau, var, var, "choice", centred=True)
    else:  # E[ratio^2] of U(a, b): (a^2 + ab + b^2) / 3
        a, b = RATIO
        var = (a * a + a * b + b * b) / 3
        spread = Spread(tau, var, var, "number")
    level = bh_level(0.05, len(K_PER_BIAS))
    return mde(variant_design(k, spread, level), n, level, 0.8)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("planted", "tau", "n"),
    [("framing", 0.1, 100), ("availability", 0.05, 30), ("anchoring", 0.1, 100)],
    ids=["choice-5-variants", "choice-4-variants-30-samples", "number-5-variants"],
)
def test_an_effect_at_the_reported_mde_is_found_80_percent_of_the_time(planted, tau, n):
    kind = "number" if planted == "anchoring" else "choice"
    effect = _planned_mde(kind, K_PER_BIAS[planted], tau, n)
    summary = _campaigns(planted, effect, tau, n, seed=21).filter(
        pl.col("experimentSlug") == planted
    )
    found = (summary["q_variant"].fill_null(1) < 0.05) & (summary["bsi_signed"] > 0)
    rate = float(found.mean())
    print(
        f"bias-strength {planted} K={K_PER_BIAS[planted]} n={n} tau={tau}: MDE {effect:.3f}, "
        f"detected {rate:.3f} over {summary.height} seeds"
    )
    assert summary.height == SEEDS and 0.74 <= rate <= 0.86


@pytest.mark.slow
def test_with_no_bias_anywhere_bh_calls_one_at_about_alpha():
    """Every bias null (the variants' effects spread by tau around 0): Benjamini-Hochberg over
    the 11 tests then holds the chance of calling any at alpha (under the global null its FDR
    is its family-wise error), each test at about alpha / 11, the level power.py plans at."""
    summary = _campaigns(None, 0.0, 0.1, 100, seed=22)
    called = summary.with_columns(called=pl.col("q_variant").fill_null(1) < 0.05)
    family = float(called.group_by("strategy").agg(pl.col("called").any())["called"].mean())
    per_test = float(called["called"].mean())
    print(
        f"bias-strength null: any of 11 called {family:.3f}, per test {per_test:.4f} "
        f"(alpha/11 = {0.05 / 11:.4f}) over {SEEDS} seeds"
    )
    assert abs(family - 0.05) <= 2 * math.sqrt(0.05 * 0.95 / SEEDS)
    assert per_test <= 0.05 / 11 + 2 * math.sqrt(0.05 / 11 / (SEEDS * 11))

"""The Instructed to Bias analysis on a simulated campaign of the whole job (7,800 items per
model) with planted answer shares: a model with none ("base": every option alike) and one with
shares planted per product and condition ("tuned"). Every score, attraction measure and model
difference is compared with the value the plantings imply, computed here from the items, within
3.5 standard errors. (Shares planted per item, for the price gap and belief accuracy, are in
test_instructed_items.py, on a smaller job: a planner hashes the model's settings per item.)"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.session import load_job
from orchestrator.spec.models import Job
from tests.conftest import ROOT, run_quietly, write_config

JOB = load_job(ROOT / "jobs" / "instructed.json")
RAW_JOB = orjson.loads((ROOT / "jobs" / "instructed.json").read_bytes())
SCORES = (
    "Decoy Cheaper",
    "Decoy Expensive",
    "Certainty",
    "Certainty (shared styles)",
    "Belief Valid",
    "Belief Invalid",
)
PRODUCTS = ["decoy-frying-pan", "decoy-phone", "decoy-car", "decoy-real-estate"]
# per product: (the target's share with the decoy, the cheaper option's share in the pair alone)
DECOY = dict(zip(PRODUCTS, [(0.5, 0.5), (0.6, 0.5), (0.7, 0.4), (0.8, 0.3)], strict=True))


def tuned(slug: str, cond: int, item: dict | None = None) -> dict[str, float]:
    """The tuned model's shares by role per dataset and condition (the rest spread evenly)."""
    if slug.startswith("decoy"):
        target, cheaper = DECOY[slug]
        return {"target": target, "competitor": 0.92 - target} if cond else {"cheaper": cheaper}
    if slug == "certainty":
        return {"safe": (0.25, 0.75)[cond]}
    return {"valid": (0.5, 0.8)[cond]}


def none(slug: str, cond: int, item: dict | None = None) -> dict[str, float]:
    return {}


def probability(shares: dict[str, float], roles: tuple[str, ...], role: str) -> float:
    rest = [r for r in roles if r not in shares]
    return shares.get(role, (1 - sum(shares.values())) / len(rest) if rest else 0.0)


def scores_of(slug: str, cond: int, item: dict) -> list[tuple[str, str]]:
    """(score, target role) pairs, written out again from the paper's section 3.3."""
    if slug.startswith("decoy"):
        if cond == 0:
            return [("Decoy Cheaper", "cheaper"), ("Decoy Expensive", "expensive")]
        return [("Decoy Cheaper" if item["side"] == "cheaper" else "Decoy Expensive", "target")]
    if slug == "certainty":  # the "words" style is in treatment only
        shared = [("Certainty (shared styles)", "safe")] if item["style"] != "words" else []
        return [("Certainty", "safe"), *shared]
    if cond == 0 or item["believable"] == (item["form"] == "valid"):
        return [("Belief Valid" if item["form"] == "valid" else "Belief Invalid", item["form"])]
    return []


def expected(job: Job, planted: Callable, by: str | None = None) -> dict[tuple, dict[str, float]]:
    """Per score (and product, or product and pair): the bias score and attraction measure the
    plantings imply."""
    sums: dict[tuple, np.ndarray] = {}
    for e in job.experiments:
        for c in e.conditions:
            for v in c.variants:
                shares, roles = planted(e.slug, c.index, v.item), v.contract.roles
                for score, target in scores_of(e.slug, c.index, v.item):
                    key = (
                        (score,)
                        + ((e.slug,) if by else ())
                        + ((v.item.get("pair"),) if by == "pair" else ())
                    )
                    pair = 1 - probability(shares, roles, "decoy") if c.index else 1.0
                    cell = sums.setdefault(key, np.zeros(6))
                    cell[3 * c.index : 3 * c.index + 3] += (
                        probability(shares, roles, target),
                        1,
                        pair,
                    )
    return {
        k: {"bias_score": s[3] / s[4] - s[0] / s[1], "attraction": s[3] / s[5] - s[0] / s[1]}
        for k, s in sums.items()
    }


def _shares(shares: dict[str, float]) -> str:
    return "{shares = {" + ", ".join(f"{r} = {p:.4f}" for r, p in shares.items()) + "}}"


def condition_effects(job: Job, planted: Callable) -> str:
    return "\n".join(
        f"[models.simulate.effects.{e.slug}]\nconditions = ["
        + ", ".join(_shares(planted(e.slug, c.index)) for c in e.conditions)
        + "]"
        for e in job.experiments
    )


def campaign(folder: Path, jobs: str, samples: int, models: list[tuple[str, float, str]]) -> Path:
    """Run a simulated campaign once: models are (name, temperature, extra TOML lines)."""
    run_dir = folder / "runs" / "instructed" / "sim"
    if not (run_dir / "results.ndjson").exists():
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"""
[[models]]
provider = "simulated"
name = "{name}"
temperature = {temperature}
[models.simulate]
parse_error_rate = 0.02
{extra}
"""
            for name, temperature, extra in models
        )
        run_quietly(
            write_config(
                folder,
                f"""
name = "instructed"
jobs = [{jobs}]
samples = {samples}
seed = 4
run_id = "sim"
output_dir = "{folder / "runs"}"
"""
                + body,
            )
        )
    return run_dir


def simulated_run(base: Path) -> Path:
    """The whole job on "base" then "tuned", run once per test session (the modules that read
    it share it: copy it before changing it)."""
    return campaign(
        base / "instructed-sim",
        '"instructed"',
        1,
        [
            ("base", 1.0, ""),
            ("tuned", 1.0, "refusal_rate = 0.01\n" + condition_effects(JOB, tuned)),
        ],
    )


@functools.cache
def want(model: str, by: str | None = None) -> dict[tuple, dict[str, float]]:
    return expected(JOB, {"base": none, "tuned": tuned}[model], by)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return simulated_run(tmp_path_factory.getbasetemp())


def analyzed(run_dir: Path) -> dict[str, list[dict]]:
    result = CliRunner().invoke(app, ["analyze", str(run_dir)])
    assert result.exit_code == 0, result.output
    keys = {
        "scores": "instructed_scores",
        "accuracy": "instructed_accuracy",
        "differences": "instructed_did",
        "products": "instructed_products",
        "pairs": "instructed_price_gap",
    }
    return {
        k: orjson.loads((run_dir / f"{stem}.json").read_bytes())[k]
        for k, stem in keys.items()
        if (run_dir / f"{stem}.json").exists()
    }


@pytest.fixture(scope="module")
def tables(run_dir) -> dict[str, list[dict]]:
    return analyzed(run_dir)


def model_of(r: dict, side: str = "") -> str:
    return r[f"model{side}"].removeprefix("simulated/")


def close(r: dict, value: str, planted_value: float, se: float) -> None:
    assert abs(r[value] - planted_value) < 3.5 * se, (r, planted_value)


@pytest.mark.slow
def test_the_planted_bias_scores_are_recovered(tables):
    rows = tables["scores"]
    assert [(model_of(r), r["score"]) for r in rows] == [
        (m, s) for m in ("base", "tuned") for s in SCORES
    ]
    for r in rows:
        if r["score"].startswith("Decoy"):  # Equation 1 described, not tested (issue 45)
            assert (r["ci_low"], r["p"], r["p_t"], r["p_fisher"]) == (None,) * 4
            continue
        close(r, "bias_score", want(model_of(r))[(r["score"],)]["bias_score"], r["se"])
        assert r["ci_low"] < r["bias_score"] < r["ci_high"] and r["mode"] == "generate"
        assert r["t_df"] == r["n_treatment"] + r["n_control"] - 2
        assert r["interval"] == f"CR2 t over {r['cells']} value cells"
    by_score = {r["score"]: r for r in rows if model_of(r) == "tuned"}
    assert by_score["Certainty"]["ci_low"] > 0.3 and by_score["Belief Invalid"]["ci_high"] < 0
    assert by_score["Certainty"]["p_t"] < 1e-20 and by_score["Certainty"]["p_fisher"] < 1e-20
    assert (
        by_score["Decoy Cheaper"]["unparsed_treatment"] > 0
    )  # parse errors and refusals, counted apart


def test_the_attraction_measure_does_not_move_with_the_number_of_options(tables):
    """With no plantings the decoy's third option alone gives Equation 1 about -1/6; the
    attraction measure stays at 0. The planted tuned decoys are recovered by both."""
    for r in tables["scores"]:
        if not r["score"].startswith("Decoy"):
            assert r["attraction"] is None
            continue
        planted = want(model_of(r))[(r["score"],)]
        close(
            r,
            "attraction",
            planted["attraction"],
            (r["attraction_ci_high"] - r["attraction_ci_low"]) / 3.92,
        )
        if model_of(r) == "base":
            assert planted["bias_score"] == pytest.approx(-1 / 6) and planted["attraction"] == 0
            # Equation 1 has no p or interval on a decoy: it would call this null biased
            assert (r["ci_high"], r["p"]) == (None, None)
            assert r["attraction_ci_low"] < 0 < r["attraction_ci_high"]
            assert r["attraction_p"] > 0.001


def test_the_per_product_decoy_scores_are_recovered(tables):
    rows = tables["products"]
    assert [(model_of(r), r["score"], r["experimentSlug"]) for r in rows] == [
        (m, s, p)
        for m in ("base", "tuned")
        for s in ("Decoy Cheaper", "Decoy Expensive")
        for p in PRODUCTS
    ]
    for r in rows:
        planted = want(model_of(r), "product")[(r["score"], r["experimentSlug"])]["bias_score"]
        assert r["bias_score"] == pytest.approx(planted, abs=0.1)
        assert (r["ci_low"], r["p"]) == (None, None)  # Equation 1 on a decoy: a description
    cheaper = [r for r in rows if model_of(r) == "tuned" and r["score"] == "Decoy Cheaper"]
    assert [
        want("tuned", "product")[("Decoy Cheaper", r["experimentSlug"])]["bias_score"]
        for r in cheaper
    ] == pytest.approx([0, 0.1, 0.3, 0.5])
    assert cheaper[3]["attraction_ci_low"] > 0.2


def test_every_grid_pair_has_its_prices_gap_and_items(tables):
    pairs = {ds["slug"]: ds["pairs"] for ds in RAW_JOB["decoy"]}
    rows = tables["pairs"]
    assert len(rows) == 2 * 2 * sum(map(len, pairs.values()))  # models x scores x pairs
    for r in rows:
        pc, _, pe, _ = pairs[r["experimentSlug"]][r["pair"]]
        assert (r["target_price"], r["competitor_price"]) == (
            (pc, pe) if r["score"] == "Decoy Cheaper" else (pe, pc)
        )
        assert r["price_gap"] == round(pe - pc, 2)
        assert (
            r["n_treatment"] + r["unparsed_treatment"] == 48
            and r["n_control"] + r["unparsed_control"] == 8
        )
        # Equation 1 on a decoy is a description: no interval, even over prompts
        assert (r["ci_low"], r["ci_high"], r["prompt_ci_low"]) == (None, None, None)


def test_belief_accuracy_is_counted_per_word_set(tables):
    rows = tables["accuracy"]
    assert [(model_of(r), r["words"]) for r in rows] == [
        (m, w) for m in ("base", "tuned") for w in ("invented", "real", "all")
    ]
    for r in rows:  # a share planted per condition leaves accuracy at 0.5 (tuned: 0.8 valid on valid and invalid)
        assert r["n"] + r["unparsed"] == (1344 if r["words"] == "all" else 672)
        assert (
            r["accuracy"] == pytest.approx(r["correct"] / r["n"])
            and r["ci_low"] < r["accuracy"] < r["ci_high"]
        )
        close(r, "accuracy", 0.5, (r["ci_high"] - r["ci_low"]) / 3.92)


def test_the_difference_in_differences_is_the_first_model_minus_the_second(tables):
    scores = {(model_of(r), r["score"]): r for r in tables["scores"]}
    rows = tables["differences"]
    assert [(model_of(r, "_a"), model_of(r, "_b"), r["score"]) for r in rows] == [
        ("base", "tuned", s) for s in SCORES
    ]
    for r in rows:
        a, b = scores[("base", r["score"])], scores[("tuned", r["score"])]
        assert r["did"] == pytest.approx(a["bias_score"] - b["bias_score"])
        if r["score"].startswith("Decoy"):  # a difference of Equation-1 scores: described
            assert (r["ci_low"], r["p"]) == (None, None) and r["attraction_p"] is not None
            continue
        assert r["cells"] == a["cells"] and r["ci_low"] < r["did"] < r["ci_high"]
        # the two models' answers are independent here: the variances add, near enough
        se = math.hypot(a["se"], b["se"])
        half = stats.t.ppf(0.975, r["df"])  # 7 prize rows for certainty: t with 6 df
        assert (r["ci_high"] - r["ci_low"]) / (2 * half) == pytest.approx(se, rel=0.15)
        close(
            r,
            "did",
            want("base")[(r["score"],)]["bias_score"] - want("tuned")[(r["score"],)]["bias_score"],
            se,
        )
    by_score = {r["score"]: r for r in rows}
    assert (
        by_score["Certainty"]["did"] < 0 and by_score["Certainty"]["p"] == 2 / 128
    )  # planted -0.5, 7 prize rows: the randomisation p's floor, 2/2^7
    assert (
        by_score["Belief Valid"]["ci_high"] < 0 < by_score["Belief Invalid"]["ci_low"]
    )  # -0.3, +0.3


def test_the_report_has_every_section_its_figures_and_the_deviations(run_dir, tables):
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    md = (run_dir / "report" / "report.md").read_text()
    for heading in (
        "bias scores",
        "belief-bias accuracy",
        "differences between models",
        "decoy scores per product",
        "decoy score by price gap",
    ):
        assert f"## Instructed to Bias: {heading}" in md
    assert "## Deviations from the seed-004 paper (Instructed to Bias)" in md
    from orchestrator.studies.instructed.deviations import DEVIATIONS

    assert all(d.what in md and d.why in md for d in DEVIATIONS)
    for figure in ("instructed-scores", "instructed-price-gap"):
        assert (run_dir / "report" / f"{figure}.png").stat().st_size > 10_000
        assert f"![{figure}]({figure}.png)" in md
    html = (run_dir / "report" / "report.html").read_text()
    assert html.count("<svg") >= 2 and "simulated/tuned" in html


def test_the_figures_show_the_tables_values(tables):
    from orchestrator.studies.instructed.plots import gap_figure, scores_figure

    scores = pl.DataFrame(tables["scores"])
    bars = scores_figure(scores).axes[0].patches
    shown = [
        r["attraction"] if r["score"].startswith("Decoy") else r["bias_score"]
        for r in tables["scores"]
    ]
    assert [b.get_height() for b in bars] == pytest.approx(shown)  # the decoy: attraction
    pairs = pl.DataFrame(tables["pairs"])
    fig = gap_figure(pairs)
    assert [ax.get_title() for ax in fig.axes] == [p.removeprefix("decoy-") for p in PRODUCTS]
    series = next(c for c in fig.axes[3].containers if c.get_label() == "simulated/tuned")
    shown = sorted(zip(*series.lines[0].get_data(), strict=True))
    rows = pairs.filter(
        (pl.col("model") == "simulated/tuned")
        & (pl.col("score") == "Decoy Cheaper")
        & (pl.col("experimentSlug") == "decoy-real-estate")
    ).sort("price_gap", "pair")
    assert [y for _, y in shown] == pytest.approx(
        rows.sort("price_gap", "bias_score")["bias_score"].to_list()
    )

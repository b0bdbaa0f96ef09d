"""Shares planted per item, on a smaller job (real estate and belief bias, one template each, 8
samples an item): a decoy effect that grows with the price gap (the paper's Figure 6), belief
accuracy that differs between real and invented words (section 6.3), and a model at
temperature 0 whose repeated samples count once per item."""

from __future__ import annotations

import copy

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats

from orchestrator.session import load_job
from tests.test_instructed_analysis import (
    RAW_JOB,
    _shares,
    analyzed,
    campaign,
    close,
    expected,
    model_of,
)

SAMPLES = 8


def small_job() -> dict:
    raw = copy.deepcopy(RAW_JOB)
    estate = next(ds for ds in raw["decoy"] if ds["slug"] == "decoy-real-estate")
    estate.update(templates=estate["templates"][:1], decoys=estate["decoys"][:1])
    belief = raw["belief"][0]
    belief.update(
        templates=belief["templates"][:1], real=belief["real"][:6], invented=belief["invented"][:6]
    )
    return {**raw, "decoy": [estate], "certainty": [], "belief": [belief]}


def planted(slug: str, cond: int, item: dict | None = None) -> dict[str, float]:
    """Real estate: the cheaper target's share grows by 0.07 a grid pair (the gap grows with the
    pair); belief: 0.7 correct in invented words, 0.9 on consistent and 0.4 on inconsistent
    real-word arguments."""
    if slug == "decoy-real-estate":
        if cond == 0:
            return {"cheaper": 0.02}
        if item is None or item["side"] == "expensive":
            return {"target": 0.6, "competitor": 0.3}
        return {"target": 0.1 + 0.07 * item["pair"], "competitor": 0.82 - 0.07 * item["pair"]}
    if item is None:  # the belief condition-level default: never used, every item is listed
        return {}
    consistent = item["believable"] == (item["form"] == "valid")
    return {item["form"]: 0.7 if cond == 0 else 0.9 if consistent else 0.4}


def item_effects(job) -> str:
    lines = []
    for e in job.experiments:
        lines.append(f"[models.simulate.effects.{e.slug}]")
        lines.append(
            "conditions = ["
            + ", ".join(_shares(planted(e.slug, c.index)) for c in e.conditions)
            + "]"
        )
        lines.append(f"[models.simulate.effects.{e.slug}.variants]")
        for c in e.conditions:
            for v in c.variants:
                if planted(e.slug, c.index, v.item) != planted(e.slug, c.index):
                    lines.append(
                        f'"{v.id}" = [{"{}, " * c.index}{_shares(planted(e.slug, c.index, v.item))}]'
                    )
    return "\n".join(lines)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("instructed-items")
    (folder / "small.json").write_bytes(orjson.dumps(small_job()))
    job = load_job(folder / "small.json")
    run_dir = campaign(
        folder, '"small.json"', SAMPLES, [("tuned", 1.0, item_effects(job)), ("greedy", 0.0, "")]
    )
    return job, run_dir, analyzed(run_dir)


def test_the_decoy_score_grows_with_the_planted_price_gap(run):
    job, _, tables = run
    rows = [r for r in tables["pairs"] if model_of(r) == "tuned" and r["score"] == "Decoy Cheaper"]
    rows.sort(key=lambda r: r["pair"])
    assert [r["n_treatment"] + r["unparsed_treatment"] for r in rows] == [6 * SAMPLES] * 12
    planted_scores = [
        expected(job, planted, "pair")[("Decoy Cheaper", "decoy-real-estate", r["pair"])][
            "bias_score"
        ]
        for r in rows
    ]
    assert planted_scores == pytest.approx([0.08 + 0.07 * p for p in range(12)])
    got = [r["bias_score"] for r in rows]
    slope = np.polyfit(planted_scores, got, 1)[0]
    assert 0.7 < slope < 1.3, slope  # its standard error is about 0.1
    assert stats.spearmanr([r["price_gap"] for r in rows], got).statistic > 0.8
    gaps = [r["price_gap"] for r in rows]
    assert gaps == sorted(gaps)  # in this grid the real-estate gap grows with the pair
    expensive = [
        r["bias_score"]
        for r in tables["pairs"]
        if model_of(r) == "tuned" and r["score"] == "Decoy Expensive"
    ]
    assert abs(np.polyfit(range(12), expensive, 1)[0]) < 0.02  # planted flat: 0.6 - 0.98


def test_belief_accuracy_differs_between_real_and_invented_words(run):
    _, _, tables = run
    want = {"invented": 0.7, "real": (0.9 + 0.4) / 2, "all": (0.7 + 0.65) / 2}
    rows = [r for r in tables["accuracy"] if model_of(r) == "tuned"]
    assert [r["words"] for r in rows] == ["invented", "real", "all"]
    for r in rows:
        assert r["n"] + r["unparsed"] == (2 if r["words"] == "all" else 1) * 6 * 8 * SAMPLES
        close(r, "accuracy", want[r["words"]], (r["ci_high"] - r["ci_low"]) / 3.92)
    scores = {r["score"]: r for r in tables["scores"] if model_of(r) == "tuned"}
    for name in ("Belief Valid", "Belief Invalid"):  # 0.9 against 0.7 in both
        close(scores[name], "bias_score", 0.2, scores[name]["se"])


def test_a_model_at_temperature_0_counts_once_per_item(run):
    job, run_dir, tables = run
    items = {}
    for e in job.experiments:
        for c in e.conditions:
            items[(e.slug, c.index)] = len(c.variants)
    greedy = {r["score"]: r for r in tables["scores"] if "greedy" in r["model"]}
    assert "(T=0)" in next(iter(greedy.values()))["model"]
    assert (
        greedy["Decoy Cheaper"]["n_treatment"] + greedy["Decoy Cheaper"]["unparsed_treatment"]
        == items[("decoy-real-estate", 1)] // 2
    )  # the cheaper side's items, not x 8 samples
    assert (
        greedy["Decoy Cheaper"]["n_control"] + greedy["Decoy Cheaper"]["unparsed_control"]
        == items[("decoy-real-estate", 0)]
    )
    tuned = {r["score"]: r for r in tables["scores"] if model_of(r) == "tuned"}
    assert (
        tuned["Decoy Cheaper"]["n_control"] + tuned["Decoy Cheaper"]["unparsed_control"]
        == SAMPLES * items[("decoy-real-estate", 0)]
    )
    # the answers counted are each item's first sample
    records = pl.read_ndjson(run_dir / "results.ndjson").filter(
        pl.col("model").struct.field("name") == "greedy",
        pl.col("experimentSlug") == "belief",
        pl.col("sample") == 1,
        pl.col("status") == "ok",
    )
    first = records.with_columns(pl.col("response").struct.field("role").alias("role"))
    control = first.filter(pl.col("conditionIndex") == 0)
    valid = control.filter(pl.col("variant").str.contains(".valid-", literal=True))
    assert greedy["Belief Valid"]["n_control"] == valid.height
    assert greedy["Belief Valid"]["hits_control"] == (valid["role"] == "valid").sum()

"""What the 11-bias study's numbers mean: the decoy's attraction measure, models told apart by
identity, sigma_sys for K < 2, and the report's tables and figures read back from what they drew
(debiasing reductions: test_bias_strength_debiasing.py)."""

from __future__ import annotations

import json
import re
from collections import Counter
from math import comb

import numpy as np
import orjson
import polars as pl
import pytest
from rich.console import Console
from scipy import stats
from typer.testing import CliRunner

from orchestrator.analysis.names import model_names
from orchestrator.analysis.summary import analyze
from orchestrator.cli import app
from orchestrator.report.plots import plt
from orchestrator.spec.campaign import ModelConfig
from orchestrator.spec.simulate import SimulateConfig
from orchestrator.studies.bias_strength.bootstrap import bootstrap_sigma
from orchestrator.studies.bias_strength.inference import parse_failures
from orchestrator.studies.bias_strength.plots import heatmap_figure, uncertainty_figure
from orchestrator.studies.bias_strength.table import print_table
from tests.conftest import ROOT, run_quietly, write_config

STRATEGIES = ("baseline", "cot", "warning", "analyst")


def _job_of(tmp_path, slugs: tuple[str, ...], name: str = "job.json"):
    """The built-in bias-strength job cut down to some of its biases (same format, same prompts)."""
    job = json.loads((ROOT / "jobs" / "bias-strength.json").read_text())
    job["biases"] = [b for b in job["biases"] if b["slug"] in slugs]
    path = tmp_path / name
    path.write_text(json.dumps(job))
    return path


def _records(run_dir):
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


def test_a_respondent_with_no_bias_and_a_first_position_habit_shows_no_decoy_effect(tmp_path):
    """The control shows target and competitor, the treatment adds the decoy. Picking at random
    (or whatever is listed first, orders counterbalanced) gives the target 1/2 of the answers in
    the control and 1/3 in the treatment: the option count alone, not an attraction effect."""
    cfg = write_config(
        tmp_path,
        f"""
        name = "null-decoy"
        jobs = ["{_job_of(tmp_path, ("decoy",))}"]
        samples = 60
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "first-picker"
        [models.simulate]
        first_position_bias = 0.8
        """,
    )
    outcome = run_quietly(cfg)
    tables = analyze(outcome.run_dir).tables
    summary = tables["bsi_summary"]
    assert sorted(summary["strategy"]) == sorted(STRATEGIES)
    for r in summary.iter_rows(named=True):
        called = [name for name in ("significant_variant", "significant_mixed") if r[name]]
        assert not called, (
            f"{r['strategy']}: a respondent with no decoy effect called biased ({called})"
        )
        assert abs(r["bsi_signed"]) < 0.15, r  # option count alone gave -0.17
        assert 0.25 < r["extra_share_T"] < 0.42  # the decoy drew its 1/3, counted apart
    # The measure's counts, recounted from the results file: the target among target-or-competitor
    # answers, decoy answers apart.
    ok = [r for r in _records(outcome.run_dir) if r["status"] == "ok"]
    roles = Counter(
        (r["strategy"], r["variant"], r["conditionIndex"], r["response"]["role"]) for r in ok
    )
    first = np.mean([r["response"]["role"] == r["optionOrder"][0] for r in ok])
    assert first > 0.8  # the habit is there (0.8 + 0.2 x chance): what counterbalancing must cancel
    variants = tables["bsi_variants"]
    for v in variants.iter_rows(named=True):
        got = {c: roles[(v["strategy"], v["variant"], i, "target")] for i, c in enumerate("CT")}
        shown = {
            c: got[c] + roles[(v["strategy"], v["variant"], i, "competitor")]
            for i, c in enumerate("CT")
        }
        assert (v["k_C"], v["n_C"], v["k_T"], v["n_T"]) == (
            got["C"],
            shown["C"],
            got["T"],
            shown["T"],
        )
        assert (
            v["n_extra_C"] == 0
            and v["n_extra_T"] == roles[(v["strategy"], v["variant"], 1, "decoy")]
        )
        assert v["bsi_signed"] == got["T"] / shown["T"] - got["C"] / shown["C"]


# --- one campaign for the identity, figure, K < 2 and parse-failure tests -----------------------

SHARES = lambda a, b: f"[{{shares = {{yes = {a}}}}}, {{shares = {{yes = {b}}}}}]"  # noqa: E731


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """Two set-ups of one model (T=0, T=1: same name, same planted bias) and a contrarian whose
    'none' bias runs against the prediction and whose anchoring overshoots the anchor (BSI > 1);
    a bias with a single variant (K = 1)."""
    tmp = tmp_path_factory.mktemp("identity")
    job = json.loads((ROOT / "tests" / "data" / "three-biases.json").read_text())
    job["biases"].append(
        {
            "slug": "single",
            "name": "a bias with one variant",
            "kind": "choice",
            "variants": [
                {
                    "id": "o1",
                    "control": {
                        "prompt": "Case o1.",
                        "options": {"yes": "Take o1", "no": "Leave o1"},
                    },
                    "treatment": {
                        "prompt": "Case o1, nudged.",
                        "options": {"yes": "Take o1", "no": "Leave o1"},
                    },
                    "predicted": "yes",
                }
            ],
        }
    )
    (tmp / "job.json").write_text(json.dumps(job))
    sim = "".join(
        f"""
[[models]]
provider = "simulated"
name = "sim"
temperature = {t}
[models.simulate.effects.everywhere]
conditions = {SHARES(0.2, 0.8)}
"""
        for t in (0, 1)
    )
    cfg = write_config(
        tmp,
        f"""
name = "identity"
jobs = ["{tmp / "job.json"}"]
samples = 40
strategies = ["baseline", "cot"]
output_dir = "{tmp / "runs"}"
{sim}
[[models]]
provider = "simulated"
name = "contrarian"
[models.simulate]
parse_error_rate = 0.2
[models.simulate.effects.none]
conditions = {SHARES(0.8, 0.2)}
[models.simulate.effects.anchoring]
conditions = [{{mean = 100, sd = 30}}, {{mean = 2000, sd = 30}}]
""",
    )
    outcome = run_quietly(cfg)
    assert CliRunner().invoke(app, ["report", str(outcome.run_dir)]).exit_code == 0
    return outcome.run_dir, job, analyze(outcome.run_dir).tables


def _expected(run_dir, job) -> dict[tuple[str, str, str], list[float]]:
    """Signed BSI per variant, recounted from the results file: {(modelKey, strategy, bias): [...]}."""
    spec = {(b["slug"], v["id"]): v for b in job["biases"] for v in b["variants"]}
    cells: dict[tuple, list] = {}
    for r in _records(run_dir):
        if r["status"] == "ok":
            cells.setdefault(
                (
                    r["modelKey"],
                    r["strategy"],
                    r["experimentSlug"],
                    r["variant"],
                    r["conditionIndex"],
                ),
                [],
            ).append(r["response"])
    out: dict[tuple[str, str, str], list[float]] = {}
    for (key, strategy, bias, variant, cond), answers in sorted(cells.items()):
        if cond == 1:
            continue
        v = spec[(bias, variant)]
        pair = [answers, cells[(key, strategy, bias, variant, 1)]]
        if "anchor" in v:
            m_c, m_t = (np.mean([a["value"] for a in side]) for side in pair)
            signed = (m_t - m_c) / (v["anchor"] - m_c)
        else:
            p_c, p_t = (np.mean([a["role"] == v["predicted"] for a in side]) for side in pair)
            signed = p_t - p_c
        out.setdefault((key, strategy, bias), []).append(signed)
    return out


def _md_rows(md: str, heading: str) -> list[dict[str, str]]:
    """The first table under a '## heading' of the Markdown report, as dicts by column."""
    section = md[md.index(f"## {heading}") + 3 :]
    section = section[: section.index("\n## ")] if "\n## " in section else section
    table = [line.strip().strip("|") for line in section.splitlines() if line.startswith("|")]
    cols = [c.strip() for c in table[0].split(" | ")]
    return [
        dict(zip(cols, (c.strip() for c in line.split(" | ")), strict=True)) for line in table[2:]
    ]


def _number(text: str) -> float:
    return float("nan") if text == "–" else float(text.replace(",", ""))


@pytest.mark.slow
def test_two_setups_of_one_model_keep_their_own_rows_and_heatmap_columns(campaign):
    run_dir, job, tables = campaign
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    sims = [k for k, label in manifest["models"].items() if label == "simulated/sim"]
    assert len(sims) == 2
    summary = tables["bsi_summary"].filter(pl.col("strategy") == "baseline")
    names = dict(zip(summary["modelKey"], summary["model"], strict=False))
    assert sorted(names[k] for k in sims) == ["simulated/sim (T=0)", "simulated/sim (T=1)"]
    expected = _expected(run_dir, job)
    fig = heatmap_figure(summary)
    ax = fig.axes[0]
    grid = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
    columns = [t.get_text() for t in ax.get_xticklabels()]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert len(columns) == 3 and len(set(columns)) == 3
    for key in manifest["models"]:
        j = columns.index(names[key])
        for bias in ("everywhere", "some", "none", "anchoring", "single"):
            assert grid[rows.index(bias), j] == pytest.approx(
                np.mean(expected[(key, "baseline", bias)]), abs=1e-12
            )
    a, b = (grid[rows.index("everywhere"), columns.index(names[k])] for k in sims)
    assert a != b  # each set-up its own draws, not one column copied over the other
    # diverging, centred on 0, symmetric, reaching the contrarian's anchoring BSI above 1
    contrarian = next(
        k for k, label in manifest["models"].items() if label == "simulated/contrarian"
    )
    overshoot = np.mean(expected[(contrarian, "baseline", "anchoring")])
    assert overshoot > 1.2
    low, high = ax.images[0].get_clim()
    assert ax.images[0].get_cmap().name == "RdBu_r" and low == -high and high >= overshoot
    plt.close(fig)


def test_an_effect_against_the_prediction_is_not_marked_as_a_bias(campaign):
    run_dir, _, tables = campaign
    summary = tables["bsi_summary"].filter(pl.col("strategy") == "baseline")
    against = summary.filter(
        (pl.col("model") == "simulated/contrarian") & (pl.col("experimentSlug") == "none")
    )
    assert (
        against["bsi_signed"][0] < -0.4 and against["significant_mixed"][0]
    )  # real, two-sided, opposite
    page = (run_dir / "report" / "report.html").read_text()
    cells = dict(re.findall(r'<g id="bsi-cell ([^"]+)">\s*<!-- (.*?) -->', page))
    key = against["modelKey"][0]
    assert cells[f"none {key}"] == f"{against['bsi_signed'][0]:.2f}"  # no * or +
    everywhere = summary.filter(
        (pl.col("experimentSlug") == "everywhere") & pl.col("significant_mixed")
    )
    assert everywhere.height == 2  # the planted bias is marked, for both set-ups
    for r in everywhere.iter_rows(named=True):
        assert cells[f"everywhere {r['modelKey']}"].startswith(f"{r['bsi_signed']:.2f}")
        assert cells[f"everywhere {r['modelKey']}"].endswith("+")
    # the report's and the terminal's tables agree with the heatmap: no star against the prediction
    rows = {
        (re.search(r"\[(\w+)\]$", r["model"]).group(1), r["bias"]): r
        for r in _md_rows((run_dir / "report" / "report.md").read_text(), "Bias Strength Index")
        if r["strategy"] == "baseline"
    }
    opposite = rows[(key, "none")]
    assert re.fullmatch(r"[\d.e-]+ \(opposite\) \(0\.\d+\)", opposite["mixed model q (OR or Δ)"])
    assert "*" not in opposite["mixed model q (OR or Δ)"] + opposite["variant t-test q"]
    for r in everywhere.iter_rows(named=True):
        assert " *" in rows[(r["modelKey"], "everywhere")]["mixed model q (OR or Δ)"]
    console = Console(record=True, width=400)
    print_table(summary, console)
    lines = console.export_text().splitlines()
    [line] = [s for s in lines if f"[{key}]" in s and " none " in s]
    assert "(opp.)" in line and "*" not in line
    assert all(
        "*" in s
        for s in lines
        if " everywhere " in s and any(f"[{k}]" in s for k in everywhere["modelKey"])
    )


def test_the_reports_bsi_table_holds_the_numbers_of_the_results_file(campaign):
    run_dir, job, tables = campaign
    md = (run_dir / "report" / "report.md").read_text()
    expected = _expected(run_dir, job)
    rows = _md_rows(md, "Bias Strength Index")
    summary = tables["bsi_summary"]
    assert len(rows) == 3 * 2 * 5
    assert (
        summary["mixed_tau"].drop_nulls().gt(0.05).any()
    )  # some spread to show: 'some' is planted in half
    for row in rows:
        key = re.search(r"\[(\w+)\]$", row["model"]).group(1)
        signed = expected[(key, row["strategy"], row["bias"])]
        absolute = np.abs(signed)
        assert int(row["K"]) == len(signed)
        assert _number(row["signed BSI"]) == pytest.approx(np.mean(signed), rel=5e-3, abs=5e-4)
        mean_abs, sigma_tot = row["abs. BSI ± σ_tot"].split(" ± ")
        assert _number(mean_abs) == pytest.approx(np.mean(absolute), rel=5e-3, abs=5e-4)
        sigma_sys = _number(row["σ_stat / σ_sys"].split(" / ")[1])
        # the random slope's SD, the between-variant spread net of sampling noise
        tau = summary.filter(
            (pl.col("modelKey") == key)
            & (pl.col("strategy") == row["strategy"])
            & (pl.col("experimentSlug") == row["bias"])
        )["mixed_tau"][0]
        assert row["τ (log OR or Δ)"] == ("–" if tau is None else f"{tau:.3g}")
        if len(signed) >= 2:
            assert sigma_sys == pytest.approx(np.std(absolute, ddof=1), rel=5e-3, abs=5e-4)
        else:  # one variant: sigma_sys and sigma_tot unknown, and said so
            assert np.isnan(sigma_sys) and sigma_tot == "–" and "σ_sys unknown" in row["notes"]


def test_sigma_sys_of_a_single_variant_is_unknown_everywhere_not_zero(campaign):
    run_dir, _, tables = campaign
    single = tables["bsi_summary"].filter(pl.col("experimentSlug") == "single")
    assert single.height == 6 and (single["K"] == 1).all()
    assert single["sigma_sys"].is_null().all() and single["sigma_tot"].is_null().all()
    assert (
        single["sigma_stat"].is_not_null().all()
        and single["sigma_note"].str.contains("K = 1").all()
    )
    summary = orjson.loads((run_dir / "bsi_summary.json").read_bytes())["biases"]
    assert all(r["sigma_sys"] is None for r in summary if r["experimentSlug"] == "single")
    fig = uncertainty_figure(tables["bsi_summary"].filter(pl.col("strategy") == "baseline"))
    ax = fig.axes[0]
    biases = [t.get_text() for t in ax.get_xticklabels()]
    sys_bars = [p for p in ax.patches if p.get_gid() == "sigma_sys"]
    heights = {b: bar.get_height() for b, bar in zip(biases, sys_bars, strict=True)}
    assert np.isnan(heights["single"]) and heights["some"] > 0  # no bar, not a bar of height 0
    assert any(
        t.get_gid() == "missing sigma_sys single" and "unknown" in t.get_text() for t in ax.texts
    )
    # sigma_sys is the spread of noisy |BSI| values, not the wording's effect alone: the legend says so
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("incl. sampling noise" in t for t in legend) and not any(
        "wording" in t for t in legend
    )
    plt.close(fig)


def test_parse_failures_are_counted_by_condition(campaign):
    run_dir, _, tables = campaign
    failures = tables["bsi_parse_failures"]
    counts = Counter(
        (r["modelKey"], r["strategy"], r["conditionIndex"], r["status"]) for r in _records(run_dir)
    )
    assert failures.height == 3 * 2
    for r in failures.iter_rows(named=True):
        k = (r["modelKey"], r["strategy"])
        records = [
            sum(n for (m, s, c, _), n in counts.items() if (m, s, c) == (*k, i)) for i in (0, 1)
        ]
        errors = [counts[(*k, i, "parse_error")] for i in (0, 1)]
        assert (r["pe_C"], r["rec_C"], r["pe_T"], r["rec_T"]) == (
            errors[0],
            records[0],
            errors[1],
            records[1],
        )
        if r["model"] != "simulated/contrarian":
            assert errors == [0, 0] and r["p_depends_on_condition"] is None
            continue
        assert (
            0.15 < r["parse_error_rate_control"] < 0.25
            and 0.15 < r["parse_error_rate_treatment"] < 0.25
        )
        # the same rate in both conditions: Yates-corrected chi-square, by hand
        (a, b), (c, d) = (errors[0], records[0] - errors[0]), (errors[1], records[1] - errors[1])
        total = a + b + c + d
        chi2 = (
            total
            * max(0.0, abs(a * d - b * c) - total / 2) ** 2
            / ((a + b) * (c + d) * (a + c) * (b + d))
        )
        assert r["p_depends_on_condition"] == pytest.approx(stats.chi2.sf(chi2, 1), rel=1e-9)


def test_parse_failures_that_depend_on_the_condition_are_flagged_with_fishers_test():
    variants = pl.DataFrame(
        {
            "modelKey": ["m"] * 2,
            "model": ["sim/m"] * 2,
            "strategy": ["baseline"] * 2,
            "n_parse_error_C": [0, 1],
            "n_records_C": [10, 10],
            "n_parse_error_T": [4, 3],
            "n_records_T": [10, 10],
        }
    )
    [row] = parse_failures(variants).iter_rows(named=True)
    assert (row["pe_C"], row["rec_C"], row["pe_T"], row["rec_T"]) == (1, 20, 7, 20)
    # two-sided Fisher: every table with the margins as likely as or less likely than the one seen
    pmf = [comb(20, x) * comb(20, 8 - x) / comb(40, 8) for x in range(9)]
    assert row["p_depends_on_condition"] == pytest.approx(
        sum(p for p in pmf if p <= pmf[1] * (1 + 1e-7))
    )
    assert row["p_depends_on_condition"] < 0.05


# --- uncertainty: the numeric bootstrap (debiasing reductions: test_bias_strength_debiasing.py) ---------------


def test_numeric_sigma_stat_resamples_both_conditions():
    """sigma_stat of (mean_T - mean_C) / (anchor - mean_C) against the delta method with the
    samples' own moments (what the bootstrap resamples from). Control and treatment each carry a
    large share of the variance, so resampling one of them alone misses by 25% or more."""
    rng = np.random.default_rng(7)
    settings = [(100, 50, 200, 30, 500), (50, 40, 150, 40, 400), (300, 30, 350, 40, 900)]
    rows = []
    for m_c, s_c, m_t, s_t, anchor in settings:
        values_c, values_t = rng.normal(m_c, s_c, 200), rng.normal(m_t, s_t, 250)
        rows.append(
            {
                "kind": "number",
                "n_C": 200,
                "n_T": 250,
                "k_C": 0,
                "k_T": 0,
                "anchor": float(anchor),
                "values_C": values_c.tolist(),
                "values_T": values_t.tolist(),
            }
        )
    wide = pl.DataFrame(rows)
    sigma = bootstrap_sigma(wide, seed=3)
    for r, got in zip(rows, sigma, strict=True):
        c, t = np.asarray(r["values_C"]), np.asarray(r["values_T"])
        e = r["anchor"] - c.mean()
        var_t = t.var() / len(t) / e**2  # d BSI / d mean_T = 1 / e
        var_c = c.var() / len(c) * (r["anchor"] - t.mean()) ** 2 / e**4  # d BSI / d mean_C
        assert min(var_t, var_c) > 0.25 * (var_t + var_c)  # either arm alone is far off
        assert got == pytest.approx(np.sqrt(var_t + var_c), rel=0.04)


def test_models_sharing_a_label_are_named_by_the_settings_that_differ():
    simulate = lambda share: SimulateConfig.model_validate(  # noqa: E731
        {"effects": {"b": {"conditions": [{"shares": {"yes": 0.5}}, {"shares": {"yes": share}}]}}}
    )
    models = [
        ModelConfig(provider="simulated", name="m", temperature=0.0),
        ModelConfig(provider="simulated", name="m", temperature=1.0),
        ModelConfig(provider="simulated", name="m", temperature=1.0, seed=7),
        ModelConfig(provider="simulated", name="p", simulate=simulate(0.6)),
        ModelConfig(provider="simulated", name="p", simulate=simulate(0.9)),
        ModelConfig(provider="simulated", name="solo"),
    ]
    manifest = {
        "models": {m.key: m.label for m in models},
        "config": {"models": [m.model_dump(mode="json") for m in models]},
    }
    names = [model_names(manifest)[m.key] for m in models]
    assert names[:3] == [
        "simulated/m (T=0, seed=default)",
        "simulated/m (T=1, seed=default)",
        "simulated/m (T=1, seed=7)",
    ]
    # planted answers are too long to show: the key tells those apart
    assert names[3:5] == [f"simulated/p [{models[3].key}]", f"simulated/p [{models[4].key}]"]
    assert names[5] == "simulated/solo"


def test_a_model_at_temperature_0_is_told_its_sigma_stat_is_not_sampling_noise(campaign):
    _, _, tables = campaign
    summary = tables["bsi_summary"]
    cold = summary.filter(pl.col("model") == "simulated/sim (T=0)")
    warm = summary.filter(pl.col("model") == "simulated/sim (T=1)")
    assert cold.height == warm.height > 0
    assert all("T=0: one answer per prompt" in n for n in cold["sigma_note"])
    assert not any("T=0" in (n or "") for n in warm["sigma_note"])

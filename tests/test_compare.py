"""`orchestrator compare`: a planted change between two nights is flagged exactly, nights that
differ by chance alone are flagged at the nominal rate, and runs with different plans compare
what they share."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from scipy import stats
from statsmodels.stats.multitest import multipletests

from tests.conftest import cli, write_config

SIMULATED = """
name = "nightly"
jobs = ["paired"]
seed = 20261130
samples = 20
{extra_top}
[[models]]
provider = "simulated"
name = "sim-respondent"
temperature = 1.0

[models.simulate]
draws = "run"
parse_error_rate = 0.02
[models.simulate.effects.anchoring-first-number]
conditions = [{{mean = 1150, sd = 120}}, {{mean = 880, sd = 120}}]
[models.simulate.effects.decoy-subscription-choice]
conditions = [{{shares = {{"Pro — €14/month, 100 GB" = 0.45}}}}, {{shares = {{"Pro — €14/month, 100 GB" = 0.70}}}}]
{extra}
"""
# From night n2 on, the provider changes the model behind the name: the anchoring effect
# shrinks from 270 to 50, and the escalation experiment is answered by another model string
# (its answers unchanged: it has no planted effect either way).
DRIFT = """
[[models.simulate.drift]]
from_run = "n2"
[models.simulate.drift.effects.anchoring-first-number]
conditions = [{mean = 1150, sd = 120}, {mean = 1100, sd = 120}]
[models.simulate.drift.effects.escalation-past-investment]
served_model = "sim-respondent-2026-12"
"""


def _config(
    tmp_path: Path, extra: str = "", extra_top: str = "", name: str = "campaign.toml"
) -> Path:
    return write_config(tmp_path, SIMULATED.format(extra=extra, extra_top=extra_top), name)


def _nights(tmp_path: Path, config: Path, *run_ids: str) -> Path:
    for run_id in run_ids:
        done = cli("run", str(config), "--run-id", run_id, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    return tmp_path / "runs" / "nightly"


def _flags(path: Path) -> set[tuple[str, str]]:
    return {(f["flag"], f.get("experiment")) for f in json.loads(path.read_text())["flags"]}


def test_a_planted_change_is_flagged_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # the terminal output, unwrapped
    campaign = _nights(tmp_path, _config(tmp_path, DRIFT), "n1", "n2")
    hook = tmp_path / "hook.txt"
    done = cli(
        "compare",
        str(campaign / "n1"),
        str(campaign / "n2"),
        "--on-change",
        f"{sys.executable} -c \"import sys; open('{hook}', 'w').write(sys.argv[1])\"",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    path = campaign / "compare" / "n1__n2.json"
    flags = _flags(path)  # the shrunken effect may also have fallen under significance
    assert flags - {("vanished", "anchoring-first-number")} == {
        ("effect_changed", "anchoring-first-number"),
        ("served_model", "escalation-past-investment"),
    }
    report = json.loads(path.read_text())
    anchoring = next(r for r in report["effects"] if r["experiment"] == "anchoring-first-number")
    assert anchoring["change_ci_low"] < -220 < anchoring["change_ci_high"]  # planted: 50 - 270
    assert report["plan"]["same"] and report["exit_code"] == 1
    assert hook.read_text() == str(path)  # the hook got the comparison's path
    assert "flag effect_changed" in done.stdout and "sim-respondent-2026-12" in done.stdout
    # --fail-on picks what counts: the served-model change alone still fails, a sign flip not
    assert (
        cli(
            "compare",
            str(campaign / "n1"),
            str(campaign / "n2"),
            "--fail-on",
            "served_model",
            cwd=tmp_path,
        ).returncode
        == 1
    )
    quiet = cli(
        "compare",
        str(campaign / "n1"),
        str(campaign / "n2"),
        "--fail-on",
        "sign_flip,parse_error_rate",
        cwd=tmp_path,
    )
    assert quiet.returncode == 0, quiet.stdout
    assert "(not in --fail-on)" in quiet.stdout


def test_previous_compares_the_latest_night_with_the_one_before(tmp_path):
    config = _config(tmp_path)
    for _ in range(3):
        assert cli("run", str(config), "--run-id", "auto", cwd=tmp_path).returncode == 0
    campaign = tmp_path / "runs" / "nightly"
    day = sorted(p.name for p in campaign.iterdir() if (p / "manifest.json").is_file())[0]
    done = cli("compare", "--previous", str(campaign), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (campaign / "compare" / f"{day}-2__{day}-3.json").is_file()
    assert "nothing flagged" in done.stdout
    # a run folder: it against the run before it
    assert cli("compare", "--previous", str(campaign / f"{day}-2"), cwd=tmp_path).returncode == 0
    assert (campaign / "compare" / f"{day}__{day}-2.json").is_file()


def test_runs_with_different_plans_compare_what_they_share(tmp_path):
    campaign = _nights(tmp_path, _config(tmp_path), "n1")
    second_model = """
[[models]]
provider = "simulated"
name = "sim-other"
temperature = 1.0
[models.simulate]
draws = "run"
"""
    _nights(tmp_path, _config(tmp_path, second_model, name="more.toml"), "n2")
    done = cli("compare", str(campaign / "n1"), str(campaign / "n2"), cwd=tmp_path)
    report = json.loads((campaign / "compare" / "n1__n2.json").read_text())
    assert done.returncode == 1
    assert [f["flag"] for f in report["flags"]] == ["plan_changed"]
    assert any("sim-other" in line for line in report["plan"]["changes"])
    shared = {r["model"] for r in report["effects"]}
    assert shared == {"simulated/sim-respondent"} and len(report["effects"]) == 6
    assert {r["model"] for r in report["unshared"]["only_b"]} == {"simulated/sim-other"}
    assert not report["unshared"]["only_a"]
    # what both share is still compared: nothing but the plan changed
    assert (
        cli(
            "compare",
            str(campaign / "n1"),
            str(campaign / "n2"),
            "--fail-on",
            "effect_changed",
            cwd=tmp_path,
        ).returncode
        == 0
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["{a}"], "needs two runs"),
        (["{a}", "{a}"], "the same run"),
        (["--previous", "{a}"], "no run was started before"),
        (["{a}", "{b}", "--fail-on", "everything"], "unknown flag"),
        (["{a}", "{b}", "--out", "{a}/manifest.json"], "--out is a file"),
        (["{a}", "{b}", "--out", "{a}/compare"], "inside the run folder"),
        (["{campaign}", "{b}"], "manifest"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, args, message):
    campaign = _nights(tmp_path, _config(tmp_path), "a", "b")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    done = cli(
        "compare",
        *[a.format(a=campaign / "a", b=campaign / "b", campaign=campaign) for a in args],
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


NIGHTS = 240  # 120 independent pairs; a night takes about 0.1 s to run and analyse


@pytest.fixture(scope="module")
def unchanged_nights(tmp_path_factory) -> list:
    """NIGHTS nights of the unchanged campaign (each draws anew), run in this process."""
    from orchestrator.nightly.effects import run_effects
    from orchestrator.session import load_campaign, run_campaign

    folder = tmp_path_factory.mktemp("nights")
    config = _config(folder)
    nights = []
    for i in range(NIGHTS):
        campaign = load_campaign(
            config, {"run_id": f"night{i:03d}", "output_dir": str(folder / "runs")}
        )
        run_campaign(campaign, Console(file=io.StringIO()), handle_signals=False)
        nights.append(run_effects(folder / "runs" / "nightly" / f"night{i:03d}"))
    return nights


@pytest.mark.slow
def test_twenty_pairs_of_unchanged_nights_flag_no_more_than_the_nominal_rate(unchanged_nights):
    from orchestrator.nightly.compare import compare

    nights = unchanged_nights[:40]
    flagged = [bool(compare(nights[i], nights[i + 1]).flags) for i in range(0, 40, 2)]
    assert sum(flagged) <= 1  # 5% of 20 pairs


def test_chance_differences_are_flagged_at_the_nominal_rate_over_many_nights(unchanged_nights):
    """120 independent pairs of unchanged nights: each effect's change is significant
    (unadjusted) in about 5% of pairs (720 tests: 36 expected, SD 5.8; twice the rate, 72, or
    half, 18, fails), and a pair raises any flag in at most about 5% of pairs (Benjamini-Hochberg
    under no change keeps the chance of any flag at the level: 6 expected, 11 allowed)."""
    from orchestrator.nightly.compare import compare

    comparisons = [
        compare(unchanged_nights[i], unchanged_nights[i + 1]) for i in range(0, NIGHTS, 2)
    ]
    p = np.concatenate([c.effects["p_change"].to_numpy() for c in comparisons])
    assert len(p) == 720
    assert 22 <= (p < 0.05).sum() <= 54
    assert sum(bool(c.flags) for c in comparisons) <= 11


def test_the_tests_agree_with_scipy_and_statsmodels_on_known_data():
    import polars as pl

    from orchestrator.analysis.effects import EFFECT_SCHEMA
    from orchestrator.nightly.difference import _fisher, adjust, effect_changes

    def frame(rows):
        keys = {
            "study": "s",
            "measure": "m",
            "strategy": None,
            "modelKey": "k",
            "model": "M",
            "n": 40,
        }
        return pl.DataFrame([keys | r for r in rows], schema=EFFECT_SCHEMA)

    a = frame(
        [
            {
                "experiment": "x",
                "effect": 1.0,
                "se": 0.3,
                "ci_low": None,
                "ci_high": None,
                "p": None,
            },
            {
                "experiment": "y",
                "effect": 0.5,
                "se": None,
                "ci_low": 0.5 - 1.959964 * 0.2,
                "ci_high": 0.5 + 1.959964 * 0.2,
                "p": None,
            },
        ]
    )
    b = frame(
        [
            {
                "experiment": "x",
                "effect": 2.0,
                "se": 0.4,
                "ci_low": None,
                "ci_high": None,
                "p": None,
            },
            {
                "experiment": "y",
                "effect": 0.1,
                "se": 0.1,
                "ci_low": None,
                "ci_high": None,
                "p": None,
            },
        ]
    )
    changes, _, _ = effect_changes(a, b)
    changes = changes.sort("experiment")
    # x: z = 1 / sqrt(0.09 + 0.16) = 2; y: its se read off the CI (0.2), z = -0.4 / sqrt(0.05)
    expected = [2 * stats.norm.sf(2.0), 2 * stats.norm.sf(0.4 / np.sqrt(0.05))]
    np.testing.assert_allclose(changes["p_change"].to_numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(changes["change_ci_low"][0], 1.0 - 1.959964 * 0.5, rtol=1e-6)
    # Fisher's exact test: the tea-tasting table [[3, 1], [1, 3]], two-sided p = 0.4857
    assert _fisher(3, 4, 1, 4) == pytest.approx(0.485714, abs=1e-6)
    # Benjamini-Hochberg over effects and rates together, as statsmodels computes it
    rates = pl.DataFrame({"p_change": [0.003, None, 0.04]}, schema={"p_change": pl.Float64})
    effects, rates = adjust(changes, rates)
    family = np.array([*expected, 0.003, 0.04])
    want = multipletests(family, method="fdr_bh")[1]
    np.testing.assert_allclose(
        [*effects["q"].to_list(), rates["q"][0], rates["q"][2]], want, rtol=1e-6
    )
    assert rates["q"][1] is None


def test_effects_with_few_degrees_of_freedom_are_compared_by_welchs_t_test():
    """Two nights' means of a few values each (as a BSI over K prompt variants): the change's p
    and CI are Welch's t-test of the values themselves, as scipy computes it."""
    import polars as pl

    from orchestrator.analysis.effects import EFFECT_SCHEMA
    from orchestrator.nightly.difference import effect_changes

    night_a, night_b = np.array([0.10, 0.32, 0.05, 0.21]), np.array([0.40, 0.18, 0.52, 0.61, 0.35])

    def frame(values):
        se = values.std(ddof=1) / np.sqrt(len(values))
        return pl.DataFrame(
            [
                {
                    "study": "bsi",
                    "measure": "signed BSI",
                    "experiment": "x",
                    "strategy": "baseline",
                    "modelKey": "k",
                    "model": "M",
                    "effect": values.mean(),
                    "se": se,
                    "ci_low": None,
                    "ci_high": None,
                    "p": None,
                    "n": len(values),
                    "df": len(values) - 1.0,
                }
            ],
            schema=EFFECT_SCHEMA,
        )

    changes, _, _ = effect_changes(frame(night_a), frame(night_b))
    welch = stats.ttest_ind(night_b, night_a, equal_var=False)
    assert changes["p_change"][0] == pytest.approx(welch.pvalue, rel=1e-9)
    low, high = welch.confidence_interval(0.95)
    assert (changes["change_ci_low"][0], changes["change_ci_high"][0]) == (
        pytest.approx(low),
        pytest.approx(high),
    )


# The respondent's seed: in its draw night n1's framing effect, planted at zero, is not
# significant (as in 95% of draws), so its appearance on n2 is newly significant, not a sign flip.
EVERY_FLAG = """
name = "nightly"
jobs = ["paired"]
seed = 7
samples = 30

[[models]]
provider = "simulated"
name = "sampling"
temperature = 1.0
[models.simulate]
draws = "run"
seed = 1
[models.simulate.effects.anchoring-first-number]
conditions = [{mean = 1150, sd = 60}, {mean = 880, sd = 60}]
[models.simulate.effects.decoy-subscription-choice]
conditions = [{shares = {"Pro — €14/month, 100 GB" = 0.1}}, {shares = {"Pro — €14/month, 100 GB" = 0.9}}]
[[models.simulate.drift]]
from_run = "n2"
parse_error_rate = 0.3
refusal_rate = 0.25
[models.simulate.drift.effects.anchoring-first-number]
conditions = [{mean = 880, sd = 60}, {mean = 1150, sd = 60}]
[models.simulate.drift.effects.decoy-subscription-choice]
conditions = []
[models.simulate.drift.effects.framing-survival-mortality]
conditions = [{mean = 2, sd = 0.5}, {mean = 6, sd = 0.5}]

[[models]]
provider = "simulated"
name = "greedy"
temperature = 0
[models.simulate]
[models.simulate.effects.anchoring-first-number]
conditions = [{mean = 1150, sd = 60}, {mean = 880, sd = 60}]
[[models.simulate.drift]]
from_run = "n2"
[models.simulate.drift.effects.anchoring-first-number]
conditions = [{mean = 880, sd = 60}, {mean = 1150, sd = 60}]
"""


def test_each_kind_of_planted_change_raises_its_own_flag(tmp_path):
    """A sign reversed, an effect gone, an effect appearing, parse errors and refusals up, and a
    temperature-0 model whose effect reverses (no test possible: shown as an untested change)."""
    config = write_config(tmp_path, EVERY_FLAG)
    for night in ("n1", "n2"):
        assert cli("run", str(config), "--run-id", night, cwd=tmp_path).returncode == 0
    campaign = tmp_path / "runs" / "nightly"
    done = cli("compare", str(campaign / "n1"), str(campaign / "n2"), cwd=tmp_path)
    assert done.returncode == 1
    flags = json.loads((campaign / "compare" / "n1__n2.json").read_text())["flags"]
    found = {
        (f["flag"], f.get("experiment"), f["model"].split("/")[1].split(" ")[0]) for f in flags
    }
    assert found == {
        ("effect_changed", "anchoring-first-number", "sampling"),
        ("sign_flip", "anchoring-first-number", "sampling"),
        ("effect_changed", "decoy-subscription-choice", "sampling"),
        ("vanished", "decoy-subscription-choice", "sampling"),
        ("effect_changed", "framing-survival-mortality", "sampling"),
        ("newly_significant", "framing-survival-mortality", "sampling"),
        ("parse_error_rate", None, "sampling"),
        ("refusal_rate", None, "sampling"),
        ("untested_change", "anchoring-first-number", "greedy"),
        ("sign_flip", "anchoring-first-number", "greedy"),
    }


def test_a_night_cut_short_is_flagged_incomplete(tmp_path):
    campaign = _nights(tmp_path, _config(tmp_path), "n1", "n2")
    results = campaign / "n2" / "results.ndjson"
    results.write_bytes(b"".join(results.read_bytes().splitlines(keepends=True)[:100]))
    done = cli(
        "compare",
        str(campaign / "n1"),
        str(campaign / "n2"),
        "--fail-on",
        "incomplete",
        cwd=tmp_path,
    )
    assert done.returncode == 1
    flags = json.loads((campaign / "compare" / "n1__n2.json").read_text())["flags"]
    assert [f["detail"] for f in flags if f["flag"] == "incomplete"] == [
        "n2: 100 of 240 tasks done"
    ]


def test_a_model_whose_settings_changed_is_still_compared(tmp_path):
    """max_tokens 256 -> 300 gives the model another identity (key); one model of that name
    gone and one come, it is compared as itself, with the plan change named."""
    campaign = _nights(tmp_path, _config(tmp_path), "n1")
    longer = SIMULATED.format(extra="", extra_top="").replace(
        "temperature = 1.0\n", "temperature = 1.0\nmax_tokens = 300\n", 1
    )
    _nights(tmp_path, write_config(tmp_path, longer, "longer.toml"), "n2")
    done = cli("compare", str(campaign / "n1"), str(campaign / "n2"), cwd=tmp_path)
    report = json.loads((campaign / "compare" / "n1__n2.json").read_text())
    assert (
        len(report["effects"]) == 6
        and not report["unshared"]["only_a"]
        and not report["unshared"]["only_b"]
    )
    assert any("max_tokens" in line for line in report["plan"]["changes"])
    assert {f["flag"] for f in report["flags"]} >= {"plan_changed"} and done.returncode == 1
    assert len(report["rates"]) == 2  # parse errors and refusals, compared too


def test_a_night_without_spread_is_tested_against_the_other_nights_and_greedy_ones_are_not():
    """A sampling model whose ratings were all alike one night has no CI that night: its change
    is tested on the other night's spread (no false `untested_change`). A temperature-0 model's
    is not testable at all."""
    import polars as pl

    from orchestrator.analysis.effects import EFFECT_SCHEMA
    from orchestrator.nightly.difference import effect_changes

    def frame(effect, se, deterministic):
        row = {
            "study": "paired",
            "measure": "mean-difference",
            "experiment": "x",
            "strategy": "baseline",
            "modelKey": "k",
            "model": "M",
            "effect": effect,
            "se": se,
            "ci_low": None,
            "ci_high": None,
            "p": None,
            "n": 40,
            "df": None,
        }
        return pl.DataFrame([row], schema=EFFECT_SCHEMA).with_columns(
            deterministic=pl.lit(deterministic)
        )

    sampled, _, _ = effect_changes(frame(0.0, None, False), frame(-0.05, 0.1, False))
    assert sampled["p_change"][0] == pytest.approx(2 * stats.norm.sf(0.5))
    greedy, _, _ = effect_changes(frame(0.0, None, True), frame(-0.05, None, True))
    assert greedy["p_change"][0] is None and greedy["change"][0] == pytest.approx(-0.05)


SATURATED = """
name = "sat"
jobs = ["paired"]
samples = 20
[[models]]
provider = "simulated"
name = "sim"
temperature = 1.0
[models.simulate]
draws = "run"
[models.simulate.effects.decoy-subscription-choice]
conditions = [{shares = {"Pro — €14/month, 100 GB" = 0.0}}, {shares = {"Pro — €14/month, 100 GB" = 1.0}}]
[[models.simulate.drift]]
from_run = "n2"
[models.simulate.drift.effects.decoy-subscription-choice]
conditions = [{shares = {"Pro — €14/month, 100 GB" = 1.0}}, {shares = {"Pro — €14/month, 100 GB" = 0.0}}]
"""


def test_a_reversal_of_a_saturated_share_is_tested_and_flagged(tmp_path):
    """Every answer the target in one condition and never in the other: the plug-in spread is
    0, so the SE comes off the Newcombe interval, and the full reversal is a sign flip."""
    config = write_config(tmp_path, SATURATED)
    for night in ("n1", "n2", "n3"):
        assert cli("run", str(config), "--run-id", night, cwd=tmp_path).returncode == 0
    campaign = tmp_path / "runs" / "sat"
    assert cli("compare", str(campaign / "n1"), str(campaign / "n2"), cwd=tmp_path).returncode == 1
    flags = {
        (f["flag"], f.get("experiment"))
        for f in json.loads((campaign / "compare" / "n1__n2.json").read_text())["flags"]
    }
    assert flags == {
        ("effect_changed", "decoy-subscription-choice"),
        ("sign_flip", "decoy-subscription-choice"),
    }
    # the same saturated effect on two nights: no change, nothing flagged
    assert cli("compare", str(campaign / "n2"), str(campaign / "n3"), cwd=tmp_path).returncode == 0

"""The judge-history study (seed 002): prompts, outcome formulas, completeness, planted pull."""

from __future__ import annotations

import numpy as np
import orjson
import polars as pl
import pytest
from scipy import stats
from typer.testing import CliRunner

from orchestrator.analysis.summary import analyze
from orchestrator.cli import app
from orchestrator.session import load_job
from orchestrator.studies.judge_history.analysis import (
    location,
    model_summary,
    task_outcomes,
    wilcoxon_p,
)
from tests.conftest import ROOT, run_quietly, write_config

JOB = load_job(ROOT / "jobs" / "judge-history.json")


def test_answer_rubric_and_format_are_byte_identical_across_conditions():
    for exp in JOB.experiments:
        blind, framing, anchor = (c.variants[0].prompt for c in exp.conditions)
        assert framing.endswith(blind) and anchor.endswith(
            blind
        )  # only a history sentence is added
        assert "score" not in framing[: len(framing) - len(blind)]  # framing shows no score...
        head = anchor[: len(anchor) - len(blind)]
        assert (
            f"score of {exp.judged.prior_score} out of 5" in head
            and exp.judged.prior_verdict in head
        )
        for text in (exp.judged.question, exp.judged.rubric, exp.judged.candidate_answer):
            assert blind.count(text) == 1
    assert len({e.conditions[0].variants[0].contract for e in JOB.experiments}) == 1
    assert JOB.min_samples == 3  # the recommended repetitions per condition


def _cond(rows):
    """Per-condition fixture rows: (task, condition index, scores, verdicts)."""
    out = []
    for task, index, scores, verdicts in rows:
        out.append(
            {
                "job": "j",
                "modelKey": "m",
                "experimentSlug": task,
                "conditionIndex": index,
                "n_valid": len(scores),
                "mean": float(np.mean(scores)),
                "sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else None,
                "n_pass": sum(v == "pass" for v in verdicts),
                "n_inconsistent": sum(
                    (s >= 4) != (v == "pass") for s, v in zip(scores, verdicts, strict=True)
                ),
            }
        )
    return pl.DataFrame(out)


ITEMS = pl.DataFrame(
    {
        "job": ["j"] * 4,
        "experimentSlug": ["a", "b", "c", "tie"],
        "gold": [2, 5, 4, 3],
        "prior": [5, 2, 1, 4],
    }
)
FIXTURE = _cond(
    [
        # a: gold 2, prior 5. blind mean 2, framing 2.5, anchor 3 (pulled up toward 5)
        ("a", 0, [2, 2, 2], ["fail"] * 3),
        ("a", 1, [2, 3, 2.5], ["fail"] * 3),
        ("a", 2, [3, 3, 3], ["fail"] * 3),
        # b: gold 5, prior 2. blind 4.5 (pass), framing 5, anchor 5: moved away from the prior by 0.5
        ("b", 0, [4, 5], ["pass", "pass"]),
        ("b", 1, [5, 5], ["pass", "pass"]),
        ("b", 2, [5, 5], ["pass", "pass"]),
        # c: gold 4, prior 1. blind 11/3: fails by its mean, passes by the majority of its verdicts;
        # anchor 13/3 passes both ways. Both means are 1/3 from gold (a tie, up to float noise).
        ("c", 0, [4, 4, 3], ["pass", "pass", "fail"]),
        ("c", 1, [4, 4, 4], ["pass"] * 3),
        ("c", 2, [4, 4, 5], ["pass"] * 3),
        # tie: blind mean equals the prior (4): sign 0, so the pull is 0 whatever anchor does; the
        # framing mean (5) is past the prior, so the two anchor-vs-framing signs disagree
        ("tie", 0, [4, 4, 4], ["pass"] * 3),
        ("tie", 1, [5, 5, 5], ["pass"] * 3),
        ("tie", 2, [1, 2, 3], ["fail", "fail", "fail"]),
    ]
)


def test_per_task_outcomes_by_hand():
    t = {r["experimentSlug"]: r for r in task_outcomes(FIXTURE, ITEMS).iter_rows(named=True)}
    assert t["a"]["pull"] == pytest.approx(1.0)  # sign(5-2) * (3-2)
    assert t["b"]["pull"] == pytest.approx(-0.5)  # sign(2-4.5) * (5-4.5)
    assert t["c"]["pull"] == pytest.approx(-2 / 3)  # sign(1-11/3) * (13/3-11/3)
    assert t["tie"]["pull"] == 0.0 and not np.signbit(
        t["tie"]["pull"]
    )  # sign(4-4) = 0 (times -2: 0, not -0)
    assert t["tie"]["pull_gold_signed"] == pytest.approx(-2.0)  # sign(4-3) * (2-4)
    assert t["a"]["anchor_vs_framing"] == pytest.approx(0.5)  # sign(5-2.5) * (3-2.5)
    assert t["tie"]["anchor_vs_framing"] == 3.0  # sign(4-5) * (2-5)
    assert t["a"]["anchor_vs_framing_gold_signed"] == pytest.approx(0.5)  # sign(5-2) * (3-2.5)
    assert t["tie"]["anchor_vs_framing_gold_signed"] == -3.0  # sign(4-3) * (2-5)
    assert t["b"]["anchor_vs_framing_gold_signed"] == 0.0 and not np.signbit(
        t["b"]["anchor_vs_framing_gold_signed"]
    )
    assert t["b"]["anchor_minus_framing"] == 0.0
    assert (t["a"]["abs_error_blind"], t["a"]["abs_error_anchor"]) == (0.0, 1.0)
    # Correction over every task: a farther from gold, b nearer, c and tie as far (c up to float noise)
    assert [(t[k]["correction_harm"], t[k]["correction_help"]) for k in ("a", "b", "c", "tie")] == [
        (True, False),
        (False, True),
        (False, False),
        (False, False),
    ]
    # Majority of returned verdicts: only tie flips; verdict of the mean score: c and tie flip
    assert [t[k]["verdict_flip"] for k in ("a", "b", "c", "tie")] == [False, False, False, True]
    assert [t[k]["verdict_flip_of_mean"] for k in ("a", "b", "c", "tie")] == [
        False,
        False,
        True,
        True,
    ]
    assert (t["c"]["verdict_blind_of_mean"], t["c"]["verdict_anchor_of_mean"]) == ("fail", "pass")


def test_a_condition_without_a_valid_judgment_has_no_verdict_and_no_flip():
    cond = FIXTURE.with_columns(  # every anchor judgment of task a failed: a row with 0 valid
        [
            pl.when((pl.col("experimentSlug") == "a") & (pl.col("conditionIndex") == 2))
            .then(v)
            .otherwise(pl.col(c))
            .alias(c)
            for c, v in (("n_valid", 0), ("n_pass", 0), ("mean", None), ("sd", None))
        ]
    )
    [a] = task_outcomes(cond, ITEMS).filter(pl.col("experimentSlug") == "a").iter_rows(named=True)
    assert (
        a["verdict_anchor"] is None
        and a["verdict_flip"] is None
        and a["verdict_flip_of_mean"] is None
    )
    assert a["pull"] is None and a["correction_harm"] is None
    [s] = model_summary(task_outcomes(cond, ITEMS), cond, n_tasks=4).iter_rows(named=True)
    assert (s["verdict_flips_of"], s["verdict_flips_by_mean_of"], s["correction_tasks"]) == (
        3,
        3,
        3,
    )


def test_model_summary_by_hand_and_against_scipy():
    tasks = task_outcomes(FIXTURE, ITEMS)
    [s] = model_summary(tasks, FIXTURE, n_tasks=4).iter_rows(named=True)
    for suffix, pulls in (
        ("", np.array([1.0, -0.5, -2 / 3, 0.0])),
        ("_gold_signed", np.array([1.0, -0.5, -2 / 3, -2.0])),
    ):
        assert s[f"mean_pull{suffix}"] == pytest.approx(pulls.mean())
        assert s[f"median_pull{suffix}"] == pytest.approx(np.median(pulls))
        assert s[f"wilcoxon_p{suffix}"] == pytest.approx(
            stats.wilcoxon(pulls, zero_method="wilcox").pvalue
        )
        low, high = stats.t.interval(0.95, len(pulls) - 1, loc=pulls.mean(), scale=stats.sem(pulls))
        assert (s[f"mean_pull{suffix}_ci_low"], s[f"mean_pull{suffix}_ci_high"]) == (
            pytest.approx(low),
            pytest.approx(high),
        )
        assert np.isnan(
            s[f"median_pull{suffix}_ci_low"]
        )  # no order-statistic pair reaches 95% over 4
    assert s["mean_anchor_vs_framing"] == pytest.approx(np.mean([0.5, 0.0, -1 / 3, 3.0]))
    assert s["mean_anchor_vs_framing_gold_signed"] == pytest.approx(
        np.mean([0.5, 0.0, -1 / 3, -3.0])
    )
    assert s["complete"] is False  # task a has 3 judgments per condition, b has 2
    assert s["incomplete"] == "valid judgments per task and condition differ (2-3)"
    assert (
        s["correction_harm"],
        s["correction_helped"],
        s["correction_tied"],
        s["correction_tasks"],
    ) == (1, 1, 2, 4)
    assert s["correction_harm_share"] == 0.25
    assert (s["verdict_flips"], s["verdict_flips_of"]) == (1, 4)
    assert (s["verdict_flip_rate"], s["verdict_flips_by_mean"], s["verdict_flips_by_mean_of"]) == (
        0.5,
        2,
        4,
    )
    assert s["inconsistent_verdicts"] == 0


def test_the_median_interval_of_eight_tasks_is_their_range():
    slugs = [f"t{i}" for i in range(8)]
    items = pl.DataFrame({"job": "j", "experimentSlug": slugs, "gold": 2, "prior": 5})
    anchors = [2, 3, 2, 4, 5, 3, 1, 2]  # blind 2 everywhere, so the pull is anchor - 2
    cond = _cond(
        [
            (t, c, [2.0] if c < 2 else [float(a)], ["fail"])
            for t, a in zip(slugs, anchors, strict=True)
            for c in range(3)
        ]
    )
    [s] = model_summary(task_outcomes(cond, items), cond, n_tasks=8).iter_rows(named=True)
    pulls = np.array(anchors) - 2.0
    ref = stats.quantile_test(pulls, q=0, p=0.5).confidence_interval(0.95)
    assert (s["median_pull_ci_low"], s["median_pull_ci_high"]) == (ref.low, ref.high) == (-1.0, 3.0)
    assert s["median_pull_ci_level"] == pytest.approx(1 - 2 / 2**8)


def test_no_movement_gives_no_wilcoxon_and_a_point_interval():
    assert np.isnan(wilcoxon_p(np.zeros(5)))
    assert (
        location(np.full(6, 0.5))["mean_pull_ci_low"]
        == location(np.full(6, 0.5))["mean_pull_ci_high"]
        == 0.5
    )


def _judge_run(tmp_path, pull: float, reps: int = 3, extra: str = ""):
    cfg = write_config(
        tmp_path,
        f"""
        name = "judge"
        jobs = ["judge-history"]
        samples = {reps}
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "pulled"
        [models.simulate.judge]
        pull = {pull}
        sd = 0.5
        {extra}
        [[models]]
        provider = "simulated"
        name = "steady"
        """,
    )
    return run_quietly(cfg)


def _score_probs(mu: float, sd: float) -> np.ndarray:
    """P(score = 1..5) of the simulated judge: Normal(mu, sd) rounded and clipped."""
    edges = np.arange(1.5, 5, 1.0)
    return np.diff(np.concatenate([[0.0], stats.norm.cdf(edges, mu, sd), [1.0]]))


def _expected_score(mu: float, sd: float) -> float:
    return float(np.dot(np.arange(1, 6), _score_probs(mu, sd)))


def test_a_judge_pulled_by_a_known_fraction_is_measured_so(tmp_path):
    outcome = _judge_run(tmp_path, pull=0.5, reps=10)
    result = analyze(outcome.run_dir)
    planted = []
    for e in JOB.experiments:  # expected pull per task, rounding and clipping included
        g, p = e.judged.gold_score, e.judged.prior_score
        blind, anchor = _expected_score(g, 0.5), _expected_score(g + 0.5 * (p - g), 0.5)
        planted.append(np.sign(p - blind) * (anchor - blind))
    rows = {r["model"]: r for r in result.tables["judge_summary"].iter_rows(named=True)}
    pulled, steady = rows["simulated/pulled"], rows["simulated/steady"]
    assert pulled["mean_pull_ci_low"] <= np.mean(planted) <= pulled["mean_pull_ci_high"]
    assert pulled["wilcoxon_p"] < 0.05 and pulled["complete"]
    assert steady["mean_pull_ci_low"] <= 0 <= steady["mean_pull_ci_high"]


def test_an_incomplete_model_is_labelled_never_imputed(tmp_path):
    outcome = _judge_run(tmp_path, pull=0.3, extra="inconsistent_rate = 0.2")
    results = outcome.run_dir / "results.ndjson"
    lines = results.read_bytes().splitlines(keepends=True)
    dropped = [l for l in lines if b'"caseId":"sunk-cost:2"' in l and b'"sample":1,' in l]
    results.write_bytes(b"".join(l for l in lines if l not in dropped))
    rows = {
        r["model"]: r
        for r in analyze(outcome.run_dir).tables["judge_summary"].iter_rows(named=True)
    }
    assert (
        rows["simulated/pulled"]["complete"] is False
        and rows["simulated/steady"]["complete"] is False
    )
    assert rows["simulated/pulled"]["tasks_with_all_conditions"] == 8  # still 2 judgments there
    assert rows["simulated/pulled"]["inconsistent_verdicts"] > 0
    # the reason, not a bare "8/8 tasks" that reads as complete
    assert (
        rows["simulated/pulled"]["incomplete"]
        == "valid judgments per task and condition differ (2-3)"
    )
    out = " ".join(CliRunner().invoke(app, ["analyze", str(outcome.run_dir)]).output.split())
    assert "NO: valid" in out


def test_export_in_the_studys_own_format(tmp_path):
    outcome = _judge_run(tmp_path, pull=0.2, reps=2)
    result = CliRunner().invoke(app, ["export", str(outcome.run_dir), "--format", "judge-history"])
    assert result.exit_code == 0, result.output
    files = sorted((outcome.run_dir / "export" / "judge-history").glob("*.json"))
    assert len(files) == 2
    for path in files:
        doc = orjson.loads(path.read_bytes())
        assert (doc["studyId"], doc["specVersion"]) == ("ai-judge-history-v1", 1)
        assert (
            doc["model"]["freshContextPerJudgment"] is True and doc["runId"] and doc["recordedAt"]
        )
        assert len(doc["judgments"]) == 8 * 3 * 2
        j = doc["judgments"][0]
        assert set(j) == {"taskId", "condition", "repetition", "score", "verdict", "reason"}
        assert {x["condition"] for x in doc["judgments"]} == {
            "blind",
            "history-framing",
            "history-anchor",
        }


def test_a_judge_run_without_a_single_answer_analyses_to_nothing_not_a_crash(tmp_path, emulator):
    from orchestrator.emulator.server import Faults
    from tests.conftest import write_config

    server = emulator(Faults(server_error=1.0))
    cfg = write_config(
        tmp_path,
        f"""
        name = "j"
        jobs = ["judge-history"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "openai"
        name = "judge"
        base_url = "{server.base_url("openai")}"
        [limits.openai]
        max_attempts = 1
        """,
    )
    assert CliRunner().invoke(app, ["run", str(cfg)]).exit_code == 1  # every task failed
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "runs" / "j" / "default")])
    assert result.exit_code == 0, result.output
    assert (
        "judge history" not in result.output
        and not (tmp_path / "runs" / "j" / "default" / "judge_summary.csv").exists()
    )


def _job_file(tmp_path, tasks: int, gold_prior) -> str:
    """A judge-history job with `tasks` tasks (the seed's texts, repeated) and the gold and prior
    scores gold_prior(i) gives task i."""
    data = orjson.loads((ROOT / "jobs" / "judge-history.json").read_bytes())
    seed_tasks = data["tasks"]
    data["tasks"] = []
    for i in range(tasks):
        gold, prior = gold_prior(i)
        data["tasks"].append(
            {
                **seed_tasks[i % len(seed_tasks)],
                "id": f"task-{i}",
                "goldScore": gold,
                "priorScore": prior,
            }
        )
    path = tmp_path / "judge-job.json"
    path.write_bytes(orjson.dumps(data))
    return str(path)


def _null_judges(count: int, sd: float) -> str:
    return "".join(
        f"""
        [[models]]
        provider = "simulated"
        name = "null{i}"
        [models.simulate]
        seed = {i}
        [models.simulate.judge]
        sd = {sd}
        """
        for i in range(count)
    )


def test_with_no_anchoring_the_gold_signed_pull_is_null_and_the_preregistered_one_is_not(tmp_path):
    """Single judgments (SD 1) of 480 tasks whose displayed prior is 1 from gold, no anchoring:
    the blind score often lands at or past the prior, so the preregistered sign follows the
    noise. Its expected value is worked out exactly beside the run; the gold-signed pull (same
    interval, same test) must find nothing. Framing is drawn like blind, so anchor vs framing has
    the same two versions with the same expected values."""
    job = _job_file(tmp_path, 480, lambda i: (2 + i % 3, 2 + i % 3 + (1 if i % 2 else -1)))
    cfg = write_config(
        tmp_path,
        f"""
        name = "judge"
        jobs = ["{job}"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        """
        + _null_judges(1, 1.0),
    )
    result = analyze(run_quietly(cfg).run_dir)
    [s] = result.tables["judge_summary"].iter_rows(named=True)
    scores = np.arange(1, 6)
    expected = []
    for i in range(480):
        gold, prior = 2 + i % 3, 2 + i % 3 + (1 if i % 2 else -1)
        p = _score_probs(gold, 1.0)  # blind and anchor: the same distribution
        expected.append(
            np.sum(
                p[:, None]
                * p[None, :]
                * np.sign(prior - scores)[:, None]
                * (scores[None, :] - scores[:, None])
            )
        )
    se = (s["mean_pull_ci_high"] - s["mean_pull_ci_low"]) / (2 * 1.965)
    assert np.mean(expected) > 0.4  # exactly 0.445: a sizeable pull toward the prior, from noise
    assert s["mean_pull"] == pytest.approx(np.mean(expected), abs=4 * se)
    assert s["mean_pull_ci_low"] > 0 and s["wilcoxon_p"] < 0.001  # the headline "finds" a pull
    gold_se = (s["mean_pull_gold_signed_ci_high"] - s["mean_pull_gold_signed_ci_low"]) / (2 * 1.965)
    assert abs(s["mean_pull_gold_signed"]) < 4 * gold_se and gold_se > 0.03
    assert s["mean_pull_gold_signed_ci_low"] < 0 < s["mean_pull_gold_signed_ci_high"]
    assert s["wilcoxon_p_gold_signed"] > 0.05
    tasks = result.tables["judge_tasks"]
    for column, truth in (
        ("anchor_vs_framing", np.mean(expected)),
        ("anchor_vs_framing_gold_signed", 0.0),
    ):
        se = tasks[column].std() / np.sqrt(480)
        assert s[f"mean_{column}"] == pytest.approx(truth, abs=4 * se) and se < 0.06


def test_correction_harm_counts_every_task_and_is_even_with_help_under_no_anchoring(tmp_path):
    """Eight judges with no anchoring (64 tasks): as many tasks get farther from gold as nearer,
    and the harm share stays at or below a half; a judge pulled half way to the prior is harmed
    on nearly every task. (The preregistered rate, farther over farther + tied, would be near 1
    for any judge whose means rarely tie.)"""
    cfg = write_config(
        tmp_path,
        f"""
        name = "judge"
        jobs = ["judge-history"]
        samples = 3
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "pulled"
        [models.simulate.judge]
        pull = 0.5
        sd = 1.0
        """
        + _null_judges(8, 1.0),
    )
    summary = analyze(run_quietly(cfg).run_dir).tables["judge_summary"]
    for r in summary.iter_rows(named=True):
        assert (
            r["correction_harm"] + r["correction_helped"] + r["correction_tied"]
            == r["correction_tasks"]
            == 8
        )
        assert r["correction_harm_share"] == r["correction_harm"] / 8
    null = summary.filter(pl.col("model") != "simulated/pulled")
    harm, helped = int(null["correction_harm"].sum()), int(null["correction_helped"].sum())
    moved = harm + helped
    assert moved >= 32  # enough untied tasks for the comparison to mean something
    assert abs(harm - helped) <= 3 * np.sqrt(moved)  # 3 SD of harm - helped, harm ~ Bin(moved, 1/2)
    assert harm / 64 <= 0.5
    [pulled] = summary.filter(pl.col("model") == "simulated/pulled").iter_rows(named=True)
    assert pulled["correction_harm"] >= 7 and pulled["correction_helped"] == 0


def test_verdict_flip_rate_is_the_published_scorers_over_the_exported_json(tmp_path):
    """verdict_flip_rate against a computation from the study's own result JSON alone: per task,
    the verdict of the mean score (4 or more = pass) blind vs history-anchor, share of tasks."""
    outcome = _judge_run(tmp_path, pull=0.5, reps=3)
    summary = analyze(outcome.run_dir).tables["judge_summary"]
    assert (
        CliRunner()
        .invoke(app, ["export", str(outcome.run_dir), "--format", "judge-history"])
        .exit_code
        == 0
    )
    rates = {}
    for path in (outcome.run_dir / "export" / "judge-history").glob("*.json"):
        scores: dict[tuple[str, str], list[int]] = {}
        for j in orjson.loads(path.read_bytes())["judgments"]:
            scores.setdefault((j["taskId"], j["condition"]), []).append(j["score"])
        verdict = {key: np.mean(v) >= 4 for key, v in scores.items()}
        tasks = {t for t, c in verdict if c == "blind"} & {
            t for t, c in verdict if c == "history-anchor"
        }
        rates[path.stem.split("__")[1]] = np.mean(
            [verdict[t, "blind"] != verdict[t, "history-anchor"] for t in tasks]
        )
    assert len(rates) == 2
    for r in summary.iter_rows(named=True):
        assert r["verdict_flip_rate"] == pytest.approx(rates[r["modelKey"]])
    assert 0 < max(rates.values()) < 1  # flips happen on some tasks, not all: the test can tell

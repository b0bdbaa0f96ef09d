"""Answers chosen by scoring (answers = "score"): every option's log-probability after the
prompt and after "Answer:" alone, the DC-PMI choice, on the emulator's /v1/completions and on
the simulated respondent; through the same limits and retries as any call."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import orjson
import pytest

from orchestrator.emulator.server import Faults
from orchestrator.plan_prompts import ANSWER_CUE
from tests.conftest import ROOT, run_quietly, write_config

RAW = json.loads((ROOT / "jobs" / "instructed.json").read_text())


def small_job(tmp_path: Path) -> Path:
    """The study's job cut down: one template each, two value rows: about 110 items."""
    data = json.loads(json.dumps(RAW))
    data["decoy"] = data["decoy"][:1]
    data["decoy"][0].update(
        templates=data["decoy"][0]["templates"][:1], pairs=data["decoy"][0]["pairs"][:2]
    )
    c = data["certainty"][0]
    c.update(templates=c["templates"][:1], prizes=c["prizes"][:2], chances=c["chances"][:2])
    b = data["belief"][0]
    b.update(templates=b["templates"][:1], real=b["real"][:2], invented=b["invented"][:2])
    path = tmp_path / "small.json"
    path.write_text(json.dumps(data))
    return path


def emulator_config(tmp_path: Path, url: str, run_id: str, *, limits: str = "") -> Path:
    return write_config(
        tmp_path,
        f"""
        name = "s"
        jobs = ["{small_job(tmp_path)}"]
        run_id = "{run_id}"
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "openai"
        name = "base-model"
        base_url = "{url}"
        answers = "score"
        [limits.openai]
        max_in_flight = 4
        {limits}
        """,
        name=f"{run_id}.toml",
    )


def records(tmp_path: Path, run_id: str, name: str = "s") -> list[dict]:
    path = tmp_path / "runs" / name / run_id / "results.ndjson"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def raw_argmax(rec: dict) -> str:
    return max(rec["response"]["scores"], key=lambda s: s["logp"])["option"]


def test_dcpmi_takes_out_a_prior_for_one_answer_that_the_raw_likelihood_follows(tmp_path, emulator):
    plain = emulator()
    biased = emulator(logprob_bonus={"1": 3.0})  # every "... 1" option is likelier anywhere
    run_quietly(emulator_config(tmp_path, plain.base_url("openai"), "plain"))
    run_quietly(emulator_config(tmp_path, biased.base_url("openai"), "biased"))
    a = {r["variant"]: r for r in records(tmp_path, "plain")}
    b = {r["variant"]: r for r in records(tmp_path, "biased")}
    assert a.keys() == b.keys() and len(a) > 100
    decoys = [v for v in a if a[v]["experimentSlug"].startswith("decoy")]
    # The prior cancels in log P(a | prompt) - log P(a | "Answer:"): the same choices.
    assert all(a[v]["response"]["choice"] == b[v]["response"]["choice"] for v in a)
    # The raw likelihood follows it: nearly every decoy item goes to option 1 ...
    to_one = sum(raw_argmax(b[v]).endswith(" 1") for v in decoys)
    assert to_one == len(decoys)
    assert sum(raw_argmax(a[v]).endswith(" 1") for v in decoys) < 0.7 * len(decoys)
    # ... so there are items where the correction changes the choice.
    changed = [v for v in decoys if raw_argmax(b[v]) != b[v]["response"]["choice"]]
    assert len(changed) >= len(decoys) // 3


def test_every_option_is_scored_and_recorded_and_the_premise_is_asked_once(tmp_path, emulator):
    server = emulator()
    run_quietly(emulator_config(tmp_path, server.base_url("openai"), "r"))
    recs = records(tmp_path, "r")
    assert {r["status"] for r in recs} == {"ok"}
    for r in recs:
        resp = r["response"]
        assert resp["mode"] == "score"
        scores = resp["scores"]
        assert [s["role"] for s in scores] and len(scores) == len({s["option"] for s in scores})
        for s in scores:
            assert s["pmi"] == pytest.approx(s["logp"] - s["premise"], abs=1e-5)
        assert resp["choice"] == max(scores, key=lambda s: s["pmi"])["option"]
        assert resp["role"] == next(s["role"] for s in scores if s["option"] == resp["choice"])
    bodies = [b for b in server.log.bodies if "prompt" in b]
    assert all(b["echo"] is True and b["logprobs"] is not None for b in bodies)
    premises = Counter(b["prompt"] for b in bodies if b["prompt"].startswith(ANSWER_CUE))
    options = {" " + s["option"] for r in recs for s in r["response"]["scores"]}
    assert set(premises) == {ANSWER_CUE + o for o in options}
    assert set(premises.values()) == {1}  # asked once each, by whichever task came first
    per_task = sum(len(r["response"]["scores"]) for r in recs)
    assert len(bodies) == per_task + len(premises)
    # one answer per premise call was paid for, and all of the calls are in the usage
    assert sum(r["attempts"] for r in recs) == len(bodies)
    assert sum(r["usage"]["completion_tokens"] for r in recs) == len(bodies)


def test_scoring_calls_are_retried_and_paced_like_any_call(tmp_path, emulator):
    clean = emulator()
    # a call fails 1 time in 4: 12 attempts leave about 1 in 17 million calls failed
    faulty = emulator(
        faults=Faults(server_error=0.15, rate_limited=0.1, retry_after_s=0.01), rpm=600, period_s=1
    )
    run_quietly(emulator_config(tmp_path, clean.base_url("openai"), "clean"))
    run_quietly(
        emulator_config(
            tmp_path,
            faulty.base_url("openai"),
            "faulty",
            limits="rpm = 500\nperiod_s = 1\nbackoff_base_s = 0.01\nmax_attempts = 12",
        )
    )
    a = {r["variant"]: r for r in records(tmp_path, "clean")}
    b = {r["variant"]: r for r in records(tmp_path, "faulty")}
    assert {r["status"] for r in b.values()} == {"ok"}
    assert sum(r["attempts"] for r in b.values()) > sum(r["attempts"] for r in a.values())
    assert faulty.log.statuses[("openai", 500)] > 0
    assert all(a[v]["response"]["scores"] == b[v]["response"]["scores"] for v in a)


def sim_config(tmp_path: Path, shares: dict, prior: dict, run_id: str = "sim") -> Path:
    effects = "\n".join(
        f"[models.simulate.effects.{slug}]\nconditions = {conds}" for slug, conds in shares.items()
    )
    prior_line = ", ".join(f'"{k}" = {v}' for k, v in prior.items())
    return write_config(
        tmp_path,
        f"""
        name = "sim"
        jobs = ["instructed"]
        run_id = "{run_id}"
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "base"
        answers = "score"
        [models.simulate]
        scoring_prior = {{{prior_line}}}
        {effects}
        """,
        name=f"{run_id}.toml",
    )


def test_planted_shares_come_back_through_dcpmi_despite_a_prior(tmp_path):
    """The simulated respondent in scoring mode: planted shares of the safe lottery (control 0.3,
    treatment 0.7) and a strong prior for "Option A" that only the raw likelihood follows."""
    conds = "[{shares = {safe = 0.3}}, {shares = {safe = 0.7}}]"
    run_quietly(sim_config(tmp_path, {"certainty": conds}, {"Option A": 4.0}))
    recs = [r for r in records(tmp_path, "sim", "sim") if r["experimentSlug"] == "certainty"]
    for cond, planted in ((0, 0.3), (1, 0.7)):
        rows = [r for r in recs if r["conditionIndex"] == cond]
        share = sum(r["response"]["role"] == "safe" for r in rows) / len(rows)
        se = (planted * (1 - planted) / len(rows)) ** 0.5
        assert abs(share - planted) < 3 * se, (cond, share, len(rows))
        raw_a = sum(raw_argmax(r) == "Option A" for r in rows) / len(rows)
        assert raw_a > 0.95  # the uncorrected argmax sees only the prior


def test_plan_counts_a_call_per_option(tmp_path, emulator):
    from orchestrator.estimate import estimate
    from orchestrator.plan import Plan
    from orchestrator.session import load_campaign

    plan = Plan(load_campaign(emulator_config(tmp_path, "http://127.0.0.1:9/v1", "p")))
    (e,) = estimate(plan).values()
    assert e.calls == sum(c.samples * len(c.contract.options) for c in plan.cells)
    assert e.calls > plan.total
    assert e.output_max == e.calls  # one token generated per scoring call
    assert all(c.messages[-1]["content"].endswith("\n" + ANSWER_CUE) for c in plan.cells)
    assert not any('"choice"' in c.messages[-1]["content"] for c in plan.cells)


@pytest.mark.parametrize(
    "model, jobs, field",
    [
        (
            'provider = "anthropic"\nname = "claude"\napi_key_env = "K"',
            '"instructed"',
            "answers",
        ),
        ('provider = "simulated"\nname = "m"', '"paired"', "models[0].answers"),
    ],
)
def test_scoring_where_it_cannot_work_is_refused_before_anything_is_written(
    tmp_path, model, jobs, field
):
    from typer.testing import CliRunner

    from orchestrator.cli import app

    config = write_config(
        tmp_path,
        f"""
        name = "bad"
        jobs = [{jobs}]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        {model}
        answers = "score"
        """,
    )
    result = CliRunner().invoke(app, ["run", str(config)], env={"K": "x"})
    assert result.exit_code == 2, result.output
    assert field in result.output and "fix:" in result.output
    assert not (tmp_path / "runs").exists()


def test_models_that_do_not_score_keep_the_task_ids_they_had():
    """answers and scoring_prior enter a model's identity only when set: the plans of every
    campaign from before scoring existed keep their task ids (and so their resumes)."""
    from orchestrator.spec.campaign import ModelConfig
    from orchestrator.spec.simulate import SimulateConfig

    plain = ModelConfig(provider="simulated", name="m", simulate=SimulateConfig()).identity()
    assert "answers" not in plain and "scoring_prior" not in plain["simulate"]
    scored = ModelConfig(
        provider="simulated",
        name="m",
        answers="score",
        simulate=SimulateConfig(scoring_prior={"A": 1.0}),
    ).identity()
    assert scored["answers"] == "score" and scored["simulate"]["scoring_prior"] == {"A": 1.0}


@pytest.mark.parametrize(
    "generating, want",
    [
        ("", ["simulated/m (answers=generate)", "simulated/m (answers=score)"]),
        (
            "temperature = 0\nmax_tokens = 24",
            ["simulated/m (T=0, max_tokens=24, answers=generate)", "simulated/m (answers=score)"],
        ),
    ],
)
def test_two_modes_of_one_model_are_named_by_mode_not_by_settings_scoring_ignores(
    tmp_path, generating, want
):
    from orchestrator.analysis.names import model_names
    from orchestrator.plan import Plan
    from orchestrator.session import load_campaign, manifest_for

    config = write_config(
        tmp_path,
        f"""
        name = "two"
        jobs = ["instructed"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        {generating}
        [[models]]
        provider = "simulated"
        name = "m"
        answers = "score"
        """,
    )
    campaign = load_campaign(config)
    assert sorted(model_names(manifest_for(campaign, Plan(campaign))).values()) == want


def test_a_resumed_scoring_run_asks_only_for_the_missing_tasks(tmp_path, emulator):
    """Half the results lost (as a crash between flushes loses the last ones): the resume scores
    only those tasks, each once, and asks for each premise once more (its cache is per run)."""
    server = emulator()
    config = emulator_config(tmp_path, server.base_url("openai"), "r")
    run_quietly(config)
    path = tmp_path / "runs" / "s" / "r" / "results.ndjson"
    lines = path.read_bytes().splitlines(keepends=True)
    kept, lost = lines[: len(lines) // 2], [orjson.loads(x) for x in lines[len(lines) // 2 :]]
    path.write_bytes(b"".join(kept))
    first = len(server.log.bodies)
    run_quietly(config)
    again = server.log.bodies[first:]
    recs = records(tmp_path, "r")
    assert sorted(r["taskId"] for r in recs) == sorted({r["taskId"] for r in recs})
    assert {r["taskId"] for r in lost} <= {r["taskId"] for r in recs} and len(recs) == len(lines)
    premises = [b for b in again if b["prompt"].startswith(ANSWER_CUE)]
    options = {" " + s["option"] for r in lost for s in r["response"]["scores"]}
    assert len(premises) == len(options)
    assert len(again) - len(premises) == sum(len(r["response"]["scores"]) for r in lost)


@pytest.mark.slow
def test_the_shipped_simulated_rehearsal_recovers_what_it_plants(tmp_path):
    """configs/instructed-simulated.toml, as shipped: every expected score its comment states
    lies in the analysis's 95% CI, in both answer modes (the scored model despite its prior)."""
    from rich.console import Console

    from orchestrator.analysis.load import open_run
    from orchestrator.session import load_campaign, run_campaign
    from orchestrator.studies.instructed.analysis import bias_scores

    campaign = load_campaign(
        ROOT / "configs" / "instructed-simulated.toml", {"output_dir": str(tmp_path / "runs")}
    )
    with open("/dev/null", "w") as sink:
        outcome = run_campaign(campaign, Console(file=sink), handle_signals=False)
    scores = bias_scores(open_run(outcome.run_dir))
    expected = {
        "base": {
            "Decoy Cheaper": -1 / 6,
            "Decoy Expensive": -1 / 6,
            "Certainty": 0.05,
            "Certainty (shared styles)": 0.05,
            "Belief Valid": 0.0,
            "Belief Invalid": 0.0,
        },
        "instruct": {
            "Decoy Cheaper": 0.1,
            "Decoy Expensive": 0.1,
            "Certainty": 0.3,
            "Certainty (shared styles)": 0.3,
            "Belief Valid": 0.2,
            "Belief Invalid": -0.2,
        },
    }
    attraction = {"base": 0.0, "instruct": 0.6 / 0.9 - 0.5}
    assert scores.height == 12  # 2 models x 6 scores
    for row in scores.iter_rows(named=True):
        name = row["model"].split("/")[1].split(" ")[0]
        if row["score"].startswith("Decoy"):
            # Equation 1 on a decoy is described, not tested: the attraction measure carries
            # the interval, and the score lies within three binomial standard errors
            assert row["ci_low"] is None and row["p"] is None, row
            p1, n1, p0, n0 = (
                row[k] for k in ("share_treatment", "n_treatment", "share_control", "n_control")
            )
            se = math.sqrt(p1 * (1 - p1) / n1 + p0 * (1 - p0) / n0)
            assert abs(row["bias_score"] - expected[name][row["score"]]) < 3 * se, row
            assert row["attraction_ci_low"] <= attraction[name] <= row["attraction_ci_high"], row
        else:
            assert row["ci_low"] <= expected[name][row["score"]] <= row["ci_high"], row
        assert row["mode"] == ("score" if name == "base" else "generate")


def test_a_scored_model_gets_one_sample_per_item_whatever_samples_says(tmp_path):
    """Its log-probabilities would repeat: five samples would pay five times for one answer."""
    from orchestrator.estimate import estimate
    from orchestrator.plan import Plan
    from orchestrator.session import load_campaign

    config = write_config(
        tmp_path,
        f"""
        name = "one"
        jobs = ["{small_job(tmp_path)}"]
        samples = 5
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "base"
        answers = "score"
        [[models]]
        provider = "simulated"
        name = "instruct"
        """,
    )
    plan = Plan(load_campaign(config))
    base, instruct = (m.key for m in plan.campaign.config.models)
    assert {c.samples for c in plan.cells if c.model_key == base} == {1}
    assert plan.per_model()[instruct] == 5 * plan.per_model()[base]
    assert estimate(plan)[base].calls == sum(
        len(c.contract.options) for c in plan.cells if c.model_key == base
    )


def test_each_model_gets_its_own_premise_scores(tmp_path):
    """Two scored models in one run share the premise cache but not its values: each option's
    premise is the model's own (here its prior: -4 + 2 for one model, -4 + 5 for the other)."""
    config = write_config(
        tmp_path,
        f"""
        name = "two"
        jobs = ["{small_job(tmp_path)}"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "a"
        answers = "score"
        simulate = {{scoring_prior = {{"valid" = 2.0}}}}
        [[models]]
        provider = "simulated"
        name = "b"
        answers = "score"
        simulate = {{scoring_prior = {{"valid" = 5.0}}}}
        """,
    )
    run_quietly(config)
    premise = {
        (r["model"]["name"], s["option"]): s["premise"]
        for r in records(tmp_path, "default", "two")
        for s in r["response"]["scores"]
    }
    assert premise[("a", "valid")] == -2.0 and premise[("b", "valid")] == 1.0
    assert premise[("a", "invalid")] == premise[("b", "invalid")] == -4.0


def test_a_tie_goes_to_the_first_option_in_the_items_own_order():
    import anyio

    from orchestrator.engine.limits import KeyController
    from orchestrator.engine.scoring import Premises, score_task
    from orchestrator.plan import Plan
    from orchestrator.providers.base import Completion
    from orchestrator.session import build_campaign
    from orchestrator.spec.campaign import CampaignConfig
    from orchestrator.spec.limits import LimitConfig

    class Flat:  # every continuation equally likely after any text
        async def score(self, task, text, continuation):
            return Completion(
                text=continuation, logprob=-1.0, usage={"prompt_tokens": 1, "completion_tokens": 1}
            )

    cfg = CampaignConfig(
        name="t",
        jobs=["instructed"],
        items=1,
        models=[{"provider": "simulated", "name": "m", "answers": "score"}],
    )
    plan = Plan(build_campaign(cfg, None))
    task = next(plan.tasks([0], set()))
    completion, attempts = anyio.run(
        score_task, Flat(), KeyController(LimitConfig()), task, Premises(), lambda: None
    )
    assert completion.text == task.cell.contract.options[0]
    assert attempts == 2 * len(task.cell.contract.options)  # each option and its premise

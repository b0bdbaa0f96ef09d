"""Exact spend of a scored task that fails part way (issue 32, item 5): the option calls it paid
for are recorded with their cost in its `failed` record (so --budget counts them), and the
resume reuses them instead of paying again."""

from __future__ import annotations

from orchestrator.plan_prompts import ANSWER_CUE
from orchestrator.providers.errors import Transient
from orchestrator.providers.openai import OpenAIProvider
from tests.conftest import run_quietly
from tests.test_scoring import emulator_config, records

_REAL_SCORE = OpenAIProvider.score


def _priced_config(tmp_path, server, run_id: str):
    """The scoring campaign with a price, so that each call's cost shows, and one attempt."""
    config = emulator_config(tmp_path, server.base_url("openai"), run_id, limits="max_attempts = 1")
    config.write_text(
        config.read_text().replace(
            'answers = "score"', 'answers = "score"\nprice = {input = 1.0, output = 1.0}'
        )
    )
    return config


def test_a_half_scored_task_records_its_spend_and_its_resume_pays_only_the_rest(
    tmp_path, emulator, monkeypatch
):
    server = emulator()
    config = _priced_config(tmp_path, server, "r1")
    from orchestrator.providers import openai as openai_provider

    real = openai_provider.OpenAIProvider.score
    calls: list[tuple[str, str]] = []  # (task id, option) of each call after a prompt
    failing = {"on": True}

    async def score(self, task, text, continuation):
        option = continuation.strip()
        if text != ANSWER_CUE:
            calls.append((task.task_id, option))
            # in the first run every task's second option fails, after its first was paid for
            if failing["on"] and option == task.cell.contract.options[1]:
                raise Transient("500 from the server")
        return await real(self, task, text, continuation)

    monkeypatch.setattr(openai_provider.OpenAIProvider, "score", score)
    run_quietly(config)
    failed = [r for r in records(tmp_path, "r1") if r["status"] == "failed"]
    assert failed
    for r in failed:  # the option it paid for, and what it cost
        (paid,) = r["response"]["scores"]
        assert r["usage"]["prompt_tokens"] > 0 and r["costUsd"] > 0

    calls.clear()
    failing["on"] = False
    run_quietly(config)  # the resume
    final = {r["taskId"]: r for r in records(tmp_path, "r1") if r["status"] == "ok"}
    for r in failed:
        task_id, (paid,) = r["taskId"], r["response"]["scores"]
        done = final[task_id]
        assert done["response"]["scores"][0]["logp"] == paid["logp"]  # reused as it was
        again = [option for t, option in calls if t == task_id]
        assert paid["option"] not in again  # not paid twice
        assert len(again) == len(done["response"]["scores"]) - 1  # only the rest


def test_a_task_whose_first_option_fails_still_records_its_paid_premises(
    tmp_path, emulator, monkeypatch
):
    server = emulator()
    config = _priced_config(tmp_path, server, "r2")
    from orchestrator.providers import openai as openai_provider

    real = openai_provider.OpenAIProvider.score

    async def score(self, task, text, continuation):
        if text != ANSWER_CUE:  # every option after a prompt fails: only premises are paid
            raise Transient("500 from the server")
        return await real(self, task, text, continuation)

    monkeypatch.setattr(openai_provider.OpenAIProvider, "score", score)
    run_quietly(config)
    recs = records(tmp_path, "r2")
    paid = [r for r in recs if r["costUsd"]]
    # each premise is asked once per run, by the first task that needs it: those tasks pay it
    assert paid and all(r["status"] == "failed" and r["usage"]["prompt_tokens"] for r in paid)


def _count_option_calls(monkeypatch, calls: list[tuple[str, str]], hold: bool = False):
    """Record (task id, option) of each option call after a prompt that the server answered.
    `hold`: the first task to have paid for an option waits at its next one until the run
    stops it (so that a stop surely finds a task part way)."""
    import anyio

    from orchestrator.providers import openai as openai_provider

    real = _REAL_SCORE  # not a wrapper an earlier call of this put in place
    held: list[str] = []

    async def score(self, task, text, continuation):
        if hold and text != ANSWER_CUE and held == [task.task_id]:
            await anyio.sleep_forever()  # cancelled by the budget's stop
        completion = await real(self, task, text, continuation)
        if text != ANSWER_CUE:
            calls.append((task.task_id, continuation.strip()))
            if hold and not held:
                held.append(task.task_id)
        return completion

    monkeypatch.setattr(openai_provider.OpenAIProvider, "score", score)


def test_a_scored_task_stopped_by_the_budget_keeps_its_paid_calls_for_the_resume(
    tmp_path, emulator, monkeypatch
):
    from typer.testing import CliRunner

    from orchestrator.cli import app
    from orchestrator.estimate import remaining, total_cost
    from orchestrator.session import load_campaign

    # The server counts 20 times the tokens the estimate assumes: the plan fits the budget, the
    # spend stops it part way, with one task (held) part way through its options.
    server = emulator(latency_s=0.01, token_ratio=20.0)
    config = _priced_config(tmp_path, server, "r3")
    from orchestrator.plan import Plan

    budget = total_cost(remaining(Plan(load_campaign(config)), {})) * 1.01
    calls: list[tuple[str, str]] = []
    _count_option_calls(monkeypatch, calls, hold=True)
    first = CliRunner().invoke(app, ["run", str(config), "--budget", f"{budget:.6f}"])
    assert first.exit_code == 3, first.output
    recs = records(tmp_path, "r3")
    stopped = [r for r in recs if r["status"] == "failed" and "Stopped" in r["error"]]
    assert stopped and all(r["costUsd"] > 0 for r in stopped)
    kept = {(r["taskId"], s["option"]) for r in recs for s in r["response"].get("scores") or ()}
    assert set(calls) <= kept  # every option call the server answered is in a record

    calls.clear()
    _count_option_calls(monkeypatch, calls)
    done = CliRunner().invoke(app, ["run", str(config)])
    assert done.exit_code == 0, done.output
    for r in stopped:  # its resume paid only for the options the stop left
        again = {option for task_id, option in calls if task_id == r["taskId"]}
        assert not again & {s["option"] for s in r["response"]["scores"]}


def test_paid_scores_are_scored_again_when_the_model_serves_something_else(
    tmp_path, emulator, monkeypatch
):
    server = emulator()
    config = _priced_config(tmp_path, server, "r4")
    from orchestrator.providers import openai as openai_provider

    real = openai_provider.OpenAIProvider.score
    failing = {"on": True}

    async def score(self, task, text, continuation):
        second = continuation.strip() == task.cell.contract.options[1]
        if failing["on"] and text != ANSWER_CUE and second:
            raise Transient("500 from the server")
        return await real(self, task, text, continuation)

    monkeypatch.setattr(openai_provider.OpenAIProvider, "score", score)
    run_quietly(config)
    failed = {r["taskId"]: r for r in records(tmp_path, "r4") if r["status"] == "failed"}
    assert failed and {r["servedModel"] for r in failed.values()} == {"base-model"}

    failing["on"] = False
    server.config.served_as = {"base-model": "base-model-2026-12"}  # a silent update meanwhile
    calls: list[tuple[str, str]] = []
    _count_option_calls(monkeypatch, calls)
    run_quietly(config)
    final = {r["taskId"]: r for r in records(tmp_path, "r4") if r["status"] == "ok"}
    for task_id, r in failed.items():
        (paid,) = r["response"]["scores"]
        again = [option for t, option in calls if t == task_id]
        assert paid["option"] in again  # not reused: the old model's score
        assert len(again) == len(final[task_id]["response"]["scores"])
        assert final[task_id]["servedModel"] == "base-model-2026-12"


def test_a_score_is_reused_only_while_the_model_that_served_it_serves(
    tmp_path, emulator, monkeypatch
):
    """Three attempts: the first pays for a task's first option on one model; the model is then
    updated, and the second attempt fails again before any call succeeds (its record keeps the
    first option's score, labelled with the old model). The third scores that option again."""
    server = emulator()
    config = _priced_config(tmp_path, server, "r5")
    from orchestrator.providers import openai as openai_provider

    real = openai_provider.OpenAIProvider.score
    fail = {"second": True, "all": False}

    async def score(self, task, text, continuation):
        second = continuation.strip() == task.cell.contract.options[1]
        if text != ANSWER_CUE and (fail["all"] or (fail["second"] and second)):
            raise Transient("500 from the server")
        return await real(self, task, text, continuation)

    monkeypatch.setattr(openai_provider.OpenAIProvider, "score", score)
    run_quietly(config)
    first = {r["taskId"]: r for r in records(tmp_path, "r5") if r["status"] == "failed"}
    assert first
    server.config.served_as = {"base-model": "base-model-2026-12"}
    fail["all"] = True
    run_quietly(config)  # every option call fails: the records keep the old scores
    second = [r for r in records(tmp_path, "r5")[-len(first) :] if r["taskId"] in first]
    assert second and all(
        s["servedModel"] == "base-model" for r in second for s in r["response"]["scores"]
    )
    fail["all"] = fail["second"] = False
    calls: list[tuple[str, str]] = []
    _count_option_calls(monkeypatch, calls)
    run_quietly(config)
    final = {r["taskId"]: r for r in records(tmp_path, "r5") if r["status"] == "ok"}
    for task_id, r in first.items():
        (paid,) = r["response"]["scores"]
        assert paid["option"] in [o for t, o in calls if t == task_id]  # scored again
        assert {s["servedModel"] for s in final[task_id]["response"]["scores"]} == {
            "base-model-2026-12"
        }

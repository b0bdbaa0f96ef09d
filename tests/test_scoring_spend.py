"""Exact spend of a scored task that fails part way (issue 32, item 5): the option calls it paid
for are recorded with their cost in its `failed` record (so --budget counts them), and the
resume reuses them instead of paying again."""

from __future__ import annotations

from orchestrator.plan_prompts import ANSWER_CUE
from orchestrator.providers.errors import Transient
from tests.conftest import run_quietly
from tests.test_scoring import emulator_config, records


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

"""Answers chosen by scoring (a model with answers = "score"): for each option, its
log-probability after the prompt and after the premise alone ("Answer:"); the choice is the
option with the highest DC-PMI score, log P(option | prompt) - log P(option | "Answer:")
(Holtzman et al. 2021, as seed 004 uses it for pretrained models).

Every scoring request is one call through the key's rate gate and retries, as any other. A
premise score depends only on the model and the option's words, so each is asked once per run
and shared by all tasks (a task waiting for one another task is computing waits for it, so no
two pay for it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from orchestrator.engine.caller import add_usage
from orchestrator.engine.calls import call_with_retries
from orchestrator.engine.limits import KeyController
from orchestrator.plan import Task
from orchestrator.plan_prompts import ANSWER_CUE, candidates
from orchestrator.providers.base import Completion, Provider

Call = Callable[[], Awaitable[tuple[Completion, int]]]


class Premises:
    """log P(option | "Answer:") per model and option, asked once per run."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], float] = {}
        self._asking: dict[tuple[str, str], anyio.Event] = {}

    async def get(self, key: tuple[str, str], ask: Call) -> tuple[float, Completion | None, int]:
        """The premise score, with the completion and attempts if this caller paid for it."""
        while key not in self._known:
            if (busy := self._asking.get(key)) is None:
                self._asking[key] = done = anyio.Event()
                try:
                    completion, attempts = await ask()
                    self._known[key] = completion.logprob
                    return completion.logprob, completion, attempts
                finally:  # on failure the next waiter asks itself
                    del self._asking[key]
                    done.set()
            await busy.wait()
        return self._known[key], None, 0


async def score_task(
    provider: Provider,
    gate: KeyController,
    task: Task,
    premises: Premises,
    on_retry: Callable[[], None],
) -> tuple[Completion, int]:
    """The scored answer as a completion whose text is the chosen option, with every option's
    scores; the attempts of all its calls."""
    cell = task.cell
    text = cell.messages[-1]["content"]
    roles = cell.contract.roles or cell.contract.options
    scores, usage, attempts, served, fingerprint, rate = [], None, 0, None, None, None
    endpoint = None  # the pool's server of the last call (a scored answer makes several)
    cached_from, paid_any = None, False  # from the cache only if every call it made was
    for option, role, continuation in zip(cell.contract.options, roles, candidates(cell.contract)):

        def premise_call(c: str = continuation) -> Awaitable[tuple[Completion, int]]:
            return call_with_retries(provider, gate, task, on_retry, scored=(ANSWER_CUE, c))

        premise, paid, n = await premises.get((cell.model_key, continuation), premise_call)
        if paid is not None:
            usage, attempts = add_usage(usage, paid.usage), attempts + n
            cached_from, paid_any = (
                paid.cached_from or cached_from,
                paid_any or not paid.cached_from,
            )
        completion, n = await call_with_retries(
            provider, gate, task, on_retry, scored=(text, continuation)
        )
        usage, attempts = add_usage(usage, completion.usage), attempts + n
        cached_from = completion.cached_from or cached_from
        paid_any = paid_any or not completion.cached_from
        served, rate = completion.served_model or served, completion.rate or rate
        fingerprint = completion.system_fingerprint or fingerprint
        endpoint = completion.endpoint or endpoint
        scores.append(
            {
                "option": option,
                "role": role,
                "logp": round(completion.logprob, 6),
                "premise": round(premise, 6),
                "pmi": round(completion.logprob - premise, 6),
            }
        )
    best = max(range(len(scores)), key=lambda i: scores[i]["pmi"])  # a tie goes to the first
    return Completion(
        text=scores[best]["option"],
        usage=usage,
        served_model=served,
        rate=rate,
        system_fingerprint=fingerprint,
        scores=tuple(scores),
        endpoint=endpoint,
        cached_from=None if paid_any else cached_from,
    ), attempts

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
from dataclasses import dataclass, field

import anyio

from orchestrator.engine.caller import add_usage
from orchestrator.engine.calls import call_with_retries
from orchestrator.engine.limits import KeyController
from orchestrator.engine.paid import Paid
from orchestrator.plan import Task
from orchestrator.plan_prompts import ANSWER_CUE, candidates
from orchestrator.providers.base import Completion, Provider
from orchestrator.providers.errors import RateInfo

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


@dataclass
class Scoring:
    """One scored task's calls so far: what they cost and found. A task that fails part way
    (or is stopped by --budget or a signal) keeps them in its `failed` record, so its spend
    counts, and a resume reuses the options scored there (`paid`) instead of paying again."""

    paid: Paid | None = None
    scores: list[dict] = field(default_factory=list)
    usage: dict[str, int] | None = None
    attempts: int = 0
    served: str | None = None
    fingerprint: str | None = None
    rate: RateInfo | None = None
    endpoint: str | None = None  # the pool's server of the last call (a scored task makes several)
    cached_from: str | None = None
    paid_any: bool = False  # from the cache only if every call it made was

    @property
    def spent(self) -> bool:
        return bool(self.scores) or self.usage is not None

    def count(self, completion: Completion, attempts: int) -> None:
        self.usage, self.attempts = (
            add_usage(self.usage, completion.usage),
            self.attempts + attempts,
        )
        self.cached_from = completion.cached_from or self.cached_from
        self.paid_any = self.paid_any or not completion.cached_from

    def completion(self, text: str) -> Completion:
        return Completion(
            text=text,
            usage=self.usage,
            served_model=self.served,
            rate=self.rate,
            system_fingerprint=self.fingerprint,
            scores=tuple(self.scores),
            endpoint=self.endpoint,
            cached_from=None if self.paid_any else self.cached_from,
        )


async def score_task(
    provider: Provider,
    gate: KeyController,
    task: Task,
    premises: Premises,
    on_retry: Callable[[], None],
    work: Scoring | None = None,
) -> tuple[Completion, int]:
    """The scored answer as a completion whose text is the chosen option, with every option's
    scores; the attempts of all its calls. `work` keeps the calls made so far, also when one
    fails, and holds those an earlier attempt of the task paid for: the options not paid for
    are scored first, then those paid for that another model (or build) served than now."""
    cell = task.cell
    text = cell.messages[-1]["content"]
    roles = dict(zip(cell.contract.options, cell.contract.roles or cell.contract.options))
    work = work if work is not None else Scoring()
    paid = work.paid.scores if work.paid is not None else {}
    work.scores = [{**known, "role": roles[o]} for o, known in paid.items() if o in roles]
    options = list(zip(cell.contract.options, candidates(cell.contract)))

    async def score(option: str, continuation: str) -> dict:
        def premise_call(c: str = continuation) -> Awaitable[tuple[Completion, int]]:
            return call_with_retries(provider, gate, task, on_retry, scored=(ANSWER_CUE, c))

        premise, premise_paid, n = await premises.get((cell.model_key, continuation), premise_call)
        if premise_paid is not None:
            work.count(premise_paid, n)
        completion, n = await call_with_retries(
            provider, gate, task, on_retry, scored=(text, continuation)
        )
        work.count(completion, n)
        work.served, work.rate = (
            completion.served_model or work.served,
            completion.rate or work.rate,
        )
        work.fingerprint = completion.system_fingerprint or work.fingerprint
        work.endpoint = completion.endpoint or work.endpoint
        return {
            "option": option,
            "role": roles[option],
            "logp": round(completion.logprob, 6),
            "premise": round(premise, 6),
            "pmi": round(completion.logprob - premise, 6),
            # who served it: a resume reuses it only while the model serves the same
            "servedModel": completion.served_model,
            "systemFingerprint": completion.system_fingerprint,
        }

    fresh = [(o, c) for o, c in options if o not in paid]
    for option, continuation in fresh:
        work.scores.append(await score(option, continuation))
    if paid and work.paid is not None:  # checked against what served this attempt's calls
        stale = set(work.paid.stale(work.served, work.fingerprint)) if fresh else set(paid)
        work.scores = [s for s in work.scores if s["option"] not in stale]
        for option, continuation in options:  # served by another model then: paid again
            if option in stale:
                work.scores.append(await score(option, continuation))
    order = {option: i for i, (option, _) in enumerate(options)}
    scores = work.scores = sorted(work.scores, key=lambda s: order[s["option"]])
    best = max(range(len(scores)), key=lambda i: scores[i]["pmi"])  # a tie goes to the first
    return work.completion(scores[best]["option"]), work.attempts

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
from pathlib import Path

import anyio
import orjson

from orchestrator.engine.caller import add_usage
from orchestrator.engine.calls import call_with_retries
from orchestrator.engine.limits import KeyController
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
    keeps them in its `failed` record (its spend counts), and a resume reuses the options
    scored there (`paid`: option -> its scores, from that record) instead of paying again."""

    paid: dict[str, dict] = field(default_factory=dict)
    scores: list[dict] = field(default_factory=list)
    usage: dict[str, int] | None = None
    attempts: int = 0
    served: str | None = None
    fingerprint: str | None = None
    rate: RateInfo | None = None
    endpoint: str | None = None  # the pool's server of the last call (a scored task makes several)
    cached_from: str | None = None
    paid_any: bool = False  # from the cache only if every call it made was

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
    fails (and holds those an earlier attempt of the task paid for)."""
    cell = task.cell
    text = cell.messages[-1]["content"]
    roles = cell.contract.roles or cell.contract.options
    work = work if work is not None else Scoring()
    for option, role, continuation in zip(cell.contract.options, roles, candidates(cell.contract)):
        if (known := work.paid.get(option)) is not None:  # paid by the task's failed attempt
            work.scores.append({**known, "role": role})
            continue

        def premise_call(c: str = continuation) -> Awaitable[tuple[Completion, int]]:
            return call_with_retries(provider, gate, task, on_retry, scored=(ANSWER_CUE, c))

        premise, paid, n = await premises.get((cell.model_key, continuation), premise_call)
        if paid is not None:
            work.count(paid, n)
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
        work.scores.append(
            {
                "option": option,
                "role": role,
                "logp": round(completion.logprob, 6),
                "premise": round(premise, 6),
                "pmi": round(completion.logprob - premise, 6),
            }
        )
    scores = work.scores
    best = max(range(len(scores)), key=lambda i: scores[i]["pmi"])  # a tie goes to the first
    return work.completion(scores[best]["option"]), work.attempts


def paid_scores(path: Path, scored: set[str]) -> dict[str, dict[str, dict]]:
    """Task id -> option -> its scores, from the `failed` records of scoring models: the option
    calls a task paid for before another of its calls failed. Valid on resume as they are (a
    task id pins the prompt and the model), so they are not paid again."""
    from orchestrator.engine.results import ResultLines

    found: dict[str, dict[str, dict]] = {}
    if not scored or not path.is_file():
        return found
    for task_id, status, model_key, _, line in ResultLines(path).records():
        if status == "failed" and model_key in scored:
            scores = (orjson.loads(line).get("response") or {}).get("scores") or []
            for entry in scores:
                if isinstance(entry, dict) and isinstance(entry.get("option"), str):
                    found.setdefault(task_id, {})[entry["option"]] = entry
    return found

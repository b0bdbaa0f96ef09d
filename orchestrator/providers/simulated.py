"""An in-process respondent with configurable (planted) answer distributions.

Answers are drawn from a generator seeded by the task id, so a task always gets the same answer:
a resumed run is reproducible, and planted effects are known exactly in tests.
"""

from __future__ import annotations

import math
import random

import anyio
import anyio.lowlevel
import orjson

from orchestrator.plan import Task
from orchestrator.plan_prompts import ANSWER_CUE
from orchestrator.providers.base import Completion
from orchestrator.providers.errors import Refused
from orchestrator.spec.campaign import ModelConfig
from orchestrator.spec.simulate import (
    ANCHORED_STEP,
    UNANCHORED_STEP,
    ConditionAnswers,
    ExperimentAnswers,
    SimulateConfig,
)

BASE_LOGPROB = -4.0  # any constant: DC-PMI and the argmax ignore it


class SimulatedProvider:
    def __init__(self, model: ModelConfig, run_id: str = "") -> None:
        self.model = model
        self.config: SimulateConfig = model.simulate or SimulateConfig()
        self.run_id = run_id
        # Drift entries in force for this run, the latest last, so its settings win.
        self.drift = [
            d for d in sorted(self.config.drift, key=lambda d: d.from_run) if run_id >= d.from_run
        ]
        self.draw_seed = (
            f"{self.config.seed}:{run_id}" if self.config.draws == "run" else str(self.config.seed)
        )
        self.parse_error_rate, self.refusal_rate = (
            self.config.parse_error_rate,
            self.config.refusal_rate,
        )
        for drift in self.drift:
            self.parse_error_rate = (
                drift.parse_error_rate
                if drift.parse_error_rate is not None
                else self.parse_error_rate
            )
            self.refusal_rate = (
                drift.refusal_rate if drift.refusal_rate is not None else self.refusal_rate
            )

    def _experiment(self, slug: str) -> ExperimentAnswers | None:
        found = self.config.effects.get(slug)
        for drift in self.drift:
            found = drift.effects.get(slug, found)
        return found

    def served(self, task: Task) -> tuple[str, str | None]:
        """The model string and system fingerprint this task's answer names."""
        name, fingerprint = self.model.name, self.config.system_fingerprint
        for drift in self.drift:
            name, fingerprint = drift.served_model or name, drift.system_fingerprint or fingerprint
        experiment = self._experiment(task.cell.experiment.slug)
        return (
            experiment.served_model if experiment and experiment.served_model else name
        ), fingerprint

    def _answers(self, task: Task) -> ConditionAnswers:
        effects = self._experiment(task.cell.experiment.slug)
        index = task.cell.condition.index
        if effects is None:
            return ConditionAnswers()
        per_condition = effects.variants.get(task.cell.variant.id, effects.conditions)
        return per_condition[index] if index < len(per_condition) else ConditionAnswers()

    def judgment(self, task: Task, rng: random.Random) -> str:
        contract, item, judge = task.cell.contract, task.cell.experiment.judged, self.config.judge
        pull = {"history-anchor": judge.pull, "history-framing": judge.framing_pull}.get(
            task.cell.condition.label, 0.0
        )
        mean = item.gold_score + pull * (item.prior_score - item.gold_score)
        score = min(contract.maximum, max(contract.minimum, round(rng.gauss(mean, judge.sd))))
        verdict = "pass" if score >= 4 else "fail"
        if rng.random() < judge.inconsistent_rate:
            verdict = "fail" if verdict == "pass" else "pass"
        return orjson.dumps(
            {"score": score, "verdict": verdict, "reason": "Judged against the rubric."}
        ).decode()

    def weights(self, task: Task) -> list[float]:
        """Each option's planted share (by option text or role); the rest spread evenly."""
        contract, spec = task.cell.contract, self._answers(task)
        options = list(contract.options)
        by_role = dict(zip(contract.roles, options, strict=True)) if contract.roles else {}
        planted = {
            by_role.get(o, o): p for o, p in spec.shares.items() if by_role.get(o, o) in options
        }
        rest = [o for o in options if o not in planted]
        left = max(0.0, 1.0 - sum(planted.values()))
        return [planted.get(o, left / len(rest) if rest else 0.0) for o in options]

    async def score(self, task: Task, text: str, continuation: str) -> Completion:
        """log P(continuation | text) for a scoring model whose DC-PMI choice is a draw from the
        planted shares: log share + Gumbel noise (seeded by task and option; the argmax of such
        scores is a draw from the shares), plus the option's `scoring_prior`, which the premise
        alone gets too, so the correction removes it and the raw argmax does not."""
        await anyio.lowlevel.checkpoint()
        option = continuation.strip()
        prior = self.config.scoring_prior.get(option, 0.0)
        prompt_tokens = len(text) // 4 + 1
        if text == ANSWER_CUE:  # the premise alone
            value = BASE_LOGPROB + prior
        else:
            contract, cell = task.cell.contract, task.cell
            weights = self.weights(task)
            bias = self.config.first_position_bias
            if bias and cell.order is not None:  # the same mixture generation draws from
                weights = [
                    (1 - bias) * w + bias * (i == cell.order[0]) for i, w in enumerate(weights)
                ]
            share = weights[contract.options.index(option)]
            u = random.Random(f"{self.draw_seed}:{task.task_id}:{option}").random()
            gumbel = -math.log(-math.log(max(u, 1e-300)))
            value = BASE_LOGPROB + prior + math.log(max(share, 1e-12)) + gumbel
        served, fingerprint = self.served(task)
        return Completion(
            text=continuation,
            served_model=served,
            logprob=value,
            system_fingerprint=fingerprint,
            usage={"prompt_tokens": prompt_tokens, "completion_tokens": 1},
        )

    def answer(self, task: Task, rng: random.Random) -> str:
        contract, spec = task.cell.contract, self._answers(task)
        if contract.kind == "audit":
            from orchestrator.providers.simulated_audit import audit_answer
            from orchestrator.spec.simulate import AuditAnswers

            return audit_answer(task, self.config.audit or AuditAnswers(), self.draw_seed)
        if contract.kind == "judgment":
            return self.judgment(task, rng)
        if contract.kind == "choice":
            options, weights = list(contract.options), self.weights(task)
            bias = self.config.first_position_bias
            if bias and task.cell.order is not None and rng.random() < bias:
                return orjson.dumps({contract.field: options[task.cell.order[0]]}).decode()
            return orjson.dumps({contract.field: rng.choices(options, weights)[0]}).decode()
        if contract.kind == "rating":
            mean = spec.mean if spec.mean is not None else (contract.minimum + contract.maximum) / 2
            value = min(contract.maximum, max(contract.minimum, round(rng.gauss(mean, spec.sd))))
            return orjson.dumps({contract.field: value}).decode()
        mean = spec.mean if spec.mean is not None else 100.0
        return orjson.dumps({contract.field: round(rng.gauss(mean, spec.sd), 3)}).decode()

    async def complete(self, task: Task) -> Completion:
        if self.config.latency_ms:
            await anyio.sleep(self.config.latency_ms / 1000)
        else:  # answers come at once: yield anyway, or a signal would never be seen
            await anyio.lowlevel.checkpoint()
        rng = random.Random(f"{self.draw_seed}:{task.task_id}")
        if rng.random() < self.refusal_rate:
            raise Refused("simulated refusal")
        if rng.random() < self.parse_error_rate:
            text = "I would rather not give a single number here."
        else:
            text = self.answer(task, rng)
        prompt_chars = sum(len(m["content"]) for m in task.cell.messages)
        served, fingerprint = self.served(task)
        usage = {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(text) // 4}
        trace = self.trace(task) if self.model.reasoning else None
        if trace is not None:  # thinking is billed as output, and counted apart
            usage["reasoning_tokens"] = len(trace) // 4
            usage["completion_tokens"] += usage["reasoning_tokens"]
        return Completion(
            text=text,
            served_model=served,
            system_fingerprint=fingerprint,
            usage=usage,
            reasoning=trace,
        )

    def trace(self, task: Task) -> str:
        """A reasoning model's own thinking, in steps: anchored on the question's figure with
        the planted chance of its experiment and condition (ReasoningAnswers), drawn apart from
        the answer so the two are independent."""
        cell = task.cell
        shares = self.config.reasoning.anchored.get(cell.experiment.slug, [])
        share = shares[cell.condition.index] if cell.condition.index < len(shares) else 0.0
        rng = random.Random(f"{self.draw_seed}:{task.task_id}:reasoning")
        question = " ".join(cell.messages[-1]["content"].split())[:100]
        return "\n".join(
            (
                f"I read the question: {question}",
                ANCHORED_STEP if rng.random() < share else UNANCHORED_STEP,
                "I weigh what matters most for the answer.",
                "So I answer in the format asked.",
            )
        )

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

"""The product's own job format (`bias-orchestrator-job/1`): biases, each with K prompt
variants of a control and a treatment condition, a predicted option role or an anchor value.

Choice options are listed by role and shown by the planner in counterbalanced orders; the
answer instruction is added here, the same for every variant, so variants differ only in the
scenario and the manipulation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from orchestrator.errors import UserError
from orchestrator.spec.loading import Forbidding, field_path, validate
from orchestrator.spec.models import (
    Condition,
    Experiment,
    Job,
    Metric,
    ResponseContract,
    Strategy,
    Variant,
)
from orchestrator.spec.plausible import plausible_range
from orchestrator.studies.bias_strength import KIND

FORMAT = "bias-orchestrator-job/1"
NUMBER_INSTRUCTION = (
    "Give a brief justification, then end your answer with a JSON object: "
    '{"value": <your estimate as a number>}'
)
# The paper's debiasing strategies (D1-D3) beside the baseline.
STRATEGIES = (
    Strategy(id="baseline"),
    Strategy(id="cot", user_suffix="Let's think step by step."),
    Strategy(
        id="warning",
        user_suffix="Be aware that this question may contain elements designed to "
        "trigger {bias}. Ensure your answer is based solely on the relevant information.",
    ),
    Strategy(
        id="analyst",
        system_prompt="You are a rational decision analyst trained to identify and "
        "avoid cognitive biases. Provide your most objective assessment.",
    ),
)


class ChoiceCondition(Forbidding):
    prompt: str = Field(min_length=1)
    options: dict[str, str] = Field(min_length=2)  # role -> option text


class NumberVariant(Forbidding):
    id: str = Field(pattern=r"^[a-z0-9-]+$")
    domain: str = ""
    control: str = Field(min_length=1)
    treatment: str = Field(min_length=1)
    anchor: float
    unit: str = ""
    plausibleRange: Any = None  # [low, high]: checked by spec/plausible.py, with its own message


class ChoiceVariant(Forbidding):
    id: str = Field(pattern=r"^[a-z0-9-]+$")
    domain: str = ""
    control: ChoiceCondition
    treatment: ChoiceCondition
    predicted: str
    plausibleRange: Any = None  # refused with a message that says why (numbers only)

    @model_validator(mode="after")
    def _roles(self) -> ChoiceVariant:
        if self.predicted not in self.treatment.options:
            raise ValueError(f"predicted role '{self.predicted}' is not a treatment option role")
        return self


class Bias(Forbidding):
    slug: str = Field(pattern=r"^[a-z0-9-]+$")
    name: str
    category: str = ""
    kind: Literal["number", "choice"]
    variants: list[dict[str, Any]] = Field(min_length=1)


class NativeJob(Forbidding):
    format: Literal["bias-orchestrator-job/1"]
    title: str = ""
    description: str = ""
    samples: int = Field(default=100, ge=1)
    temperature: float | None = None
    systemPrompt: str = ""
    biases: list[Bias] = Field(min_length=1)


def is_native(data: Any) -> bool:
    return isinstance(data, dict) and data.get("format", "").startswith("bias-orchestrator-job/")


def _number_variants(bias: Bias, path: Path, where: str) -> list[tuple[Variant, Variant]]:
    out = []
    for j, raw in enumerate(bias.variants):
        v: NumberVariant = validate(NumberVariant, raw, path, (*where, "variants", j))
        plausible = plausible_range(
            v.plausibleRange, path, f"{field_path((*where, 'variants', j))}.plausibleRange", True
        )
        contract = ResponseContract(kind="number", field="value")
        out.append(
            tuple(
                Variant(
                    id=v.id,
                    domain=v.domain,
                    prompt=f"{text}\n\n{NUMBER_INSTRUCTION}",
                    contract=contract,
                    anchor=v.anchor,
                    plausible_range=plausible,
                )
                for text in (v.control, v.treatment)
            )
        )
    return out


def _choice_variants(bias: Bias, path: Path, where: str) -> list[tuple[Variant, Variant]]:
    out = []
    for j, raw in enumerate(bias.variants):
        v: ChoiceVariant = validate(ChoiceVariant, raw, path, (*where, "variants", j))
        plausible_range(
            v.plausibleRange, path, f"{field_path((*where, 'variants', j))}.plausibleRange", False
        )
        pair = []
        for cond in (v.control, v.treatment):
            roles = tuple(cond.options)
            contract = ResponseContract(
                kind="choice",
                field="choice",
                roles=roles,
                options=tuple(cond.options[r] for r in roles),
            )
            pair.append(
                Variant(
                    id=v.id,
                    domain=v.domain,
                    prompt=cond.prompt,
                    contract=contract,
                    present_options=True,
                    predicted=v.predicted,
                )
            )
        out.append(tuple(pair))
    return out


def job_from_native(data: Any, path: Path, job_id: str) -> Job:
    spec: NativeJob = validate(NativeJob, data, path)
    experiments, seen = [], set()
    for i, bias in enumerate(spec.biases):
        where = ("biases", i)
        if bias.slug in seen:
            raise UserError(
                f"duplicate bias slug '{bias.slug}'",
                file=path,
                field=f"biases[{i}].slug",
                fix="give every bias its own slug",
            )
        seen.add(bias.slug)
        pairs = (_number_variants if bias.kind == "number" else _choice_variants)(bias, path, where)
        ids = [p[0].id for p in pairs]
        if len(set(ids)) != len(ids):
            raise UserError(
                "duplicate variant ids",
                file=path,
                field=f"biases[{i}].variants",
                fix="give every variant of a bias its own id",
            )
        conditions = tuple(
            Condition(
                index=c, label=("control", "treatment")[c], variants=tuple(p[c] for p in pairs)
            )
            for c in (0, 1)
        )
        experiments.append(
            Experiment(
                slug=bias.slug,
                bias_slug=bias.slug,
                conditions=conditions,
                metric=Metric(type="bsi", label=bias.name, unit=bias.category),
            )
        )
    return Job(
        id=job_id,
        title=spec.title,
        system_prompt=spec.systemPrompt,
        min_samples=spec.samples,
        recommended_temperature=spec.temperature,
        experiments=tuple(experiments),
        strategies=STRATEGIES,
        kind=KIND,
    )

"""Reader for the published "Cognitive Biases AI Bias Benchmark" JSON format (seed 000).

The published format gives each experiment two conditions and a metric but states the response
contract only inside the prompt text, so it is inferred from there. An experiment may carry an
explicit `responseContract` (our extension) where inference is not wanted, and a
`plausibleRange` (our extension) for its number answers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.errors import UserError
from orchestrator.spec.loading import validate
from orchestrator.spec.models import Condition, Experiment, Job, Metric, ResponseContract, Variant
from orchestrator.spec.plausible import plausible_range
from orchestrator.wording import rating_scale

# Strict, as configs are: a misspelt `valuefield` or `conditons` is refused with its path and
# a did-you-mean, never ignored. The seed-000 format's other published fields are declared,
# so a file of the published format reads as it is.
STRICT = ConfigDict(extra="forbid")


class SeedContract(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["number", "rating", "choice"]
    options: list[str] = []
    minimum: int | None = None  # a rating's bounds are declared, never assumed
    maximum: int | None = None

    @model_validator(mode="after")
    def _bounds(self) -> SeedContract:
        if self.type == "rating" and (self.minimum is None or self.maximum is None):
            raise ValueError('a rating declares its scale: "minimum" and "maximum"')
        if self.type == "rating" and self.minimum >= self.maximum:  # type: ignore[operator]
            raise ValueError(f"a rating's minimum ({self.minimum}) must be below its maximum")
        if self.type != "rating" and (self.minimum is not None or self.maximum is not None):
            raise ValueError(f'only a rating has "minimum" and "maximum", not a {self.type}')
        if self.type != "choice" and self.options:
            raise ValueError(f'only a choice has "options", not a {self.type}')
        return self


class SeedCondition(BaseModel):
    model_config = STRICT
    label: str
    prompt: str = Field(min_length=1)


class SeedMetric(BaseModel):
    model_config = STRICT
    type: Literal["mean-difference", "choice-share-difference"]
    direction: Literal["condition0-minus-condition1", "condition1-minus-condition0"]
    label: str = ""
    unit: str = ""
    valueField: str = "value"
    choiceField: str = "choice"
    targetOption: str | None = None


class SeedExperiment(BaseModel):
    model_config = STRICT
    experimentSlug: str = Field(pattern=r"^[a-z0-9-]+$")
    biasSlug: str = ""
    metric: SeedMetric
    conditions: list[SeedCondition] = Field(min_length=2, max_length=2)
    responseContract: SeedContract | None = None
    # our extension: answers outside it are counted beside the mean (spec/plausible.py)
    plausibleRange: Any = None


class SeedProtocol(BaseModel):
    model_config = STRICT
    systemPrompt: str
    minimumSamplesPerCondition: int = Field(ge=1)
    deterministicMinimumSamplesPerCondition: int | None = Field(default=None, ge=1)
    recommendedTemperature: float | None = None
    freshContextPerCase: bool = True  # published; every call here has a fresh context
    responseContract: Any = None  # published: the answer formats, in words


class SeedSpec(BaseModel):
    model_config = STRICT
    title: str = ""
    protocol: SeedProtocol
    experiments: list[SeedExperiment] = Field(min_length=1)
    # published, descriptive only
    version: Any = None
    updatedAt: Any = None
    description: Any = None
    status: Any = None
    principles: Any = None
    resultFormat: Any = None
    canonicalUrl: Any = None
    promptPackUrl: Any = None
    resultSchemaUrl: Any = None


def is_seed000(data: Any) -> bool:
    return isinstance(data, dict) and "protocol" in data and "experiments" in data


_QUOTED_CHOICE = re.compile(r'\{\s*"choice"\s*:\s*"([^"]+)"\s*\}')
_OPTION_LIST = re.compile(r"Choose one option:\s*(.+?)\.\s*Return", re.S)


def infer_contract(prompt: str, metric: SeedMetric) -> ResponseContract | None:
    """The response contract a seed-000 prompt states in words, or None if it states none."""
    if metric.type == "choice-share-difference":
        options = [o for o in _QUOTED_CHOICE.findall(prompt) if o != "..."]
        if not options and (m := _OPTION_LIST.search(prompt)):
            options = [o.strip() for o in m.group(1).split(";") if o.strip()]
        if len(options) < 2:
            return None
        return ResponseContract(
            kind="choice", field=metric.choiceField, options=tuple(dict.fromkeys(options))
        )
    if re.search(r'"value"\s*:\s*integer', prompt):
        if (scale := rating_scale(prompt)) is None:
            return None  # never a guessed 1-7: an answer of 9 on a 1-10 scale would be lost
        lo, hi = scale
        return ResponseContract(kind="rating", field=metric.valueField, minimum=lo, maximum=hi)
    if re.search(r'"value"\s*:\s*number', prompt):
        return ResponseContract(kind="number", field=metric.valueField)
    return None


def _contract(exp: SeedExperiment, cond: SeedCondition, where: str, path: Path) -> ResponseContract:
    if exp.responseContract is not None:
        c = exp.responseContract
        wanted = "choice" if exp.metric.type == "choice-share-difference" else "number or rating"
        if (c.type == "choice") != (wanted == "choice"):
            raise UserError(
                f"the metric type is {exp.metric.type}, which compares a {wanted}, but the "
                f"declared responseContract is a {c.type}",
                file=path,
                field=f"{where.rsplit('.conditions', 1)[0]}.responseContract.type",
                fix="make the metric and the contract agree: choice-share-difference with a "
                "choice, mean-difference with a number or a rating",
            )
        field = exp.metric.choiceField if c.type == "choice" else exp.metric.valueField
        try:
            return ResponseContract(
                kind=c.type,
                field=field,
                options=tuple(c.options),
                minimum=c.minimum if c.type == "rating" else None,
                maximum=c.maximum if c.type == "rating" else None,
            )
        except ValueError as exc:
            raise UserError(
                str(exc),
                file=path,
                field=f"{where}.responseContract",
                fix="list the exact option strings (at least two)",
            ) from None
    contract = infer_contract(cond.prompt, exp.metric)
    if contract is None:
        raise _undeclared(cond.prompt, exp.metric, where, path)
    return contract


def _undeclared(prompt: str, metric: SeedMetric, where: str, path: Path) -> UserError:
    """Why no contract could be read from the prompt, said as what the user can change."""
    asks_choice = bool(_QUOTED_CHOICE.search(prompt) or _OPTION_LIST.search(prompt))
    asks_integer = bool(re.search(r'"value"\s*:\s*integer', prompt))
    if metric.type == "mean-difference" and asks_choice and not asks_integer:
        what = (
            "the metric type is mean-difference (a number per answer), but the prompt asks for "
            "a choice"
        )
        fix = 'use "metric": {"type": "choice-share-difference", ...}, or ask for a number'
    elif metric.type == "choice-share-difference" and not asks_choice:
        what = (
            "the metric type is choice-share-difference, but the prompt lists no options "
            "this can read"
        )
        fix = 'declare them: "responseContract": {"type": "choice", "options": ["A", "B"]}'
    elif asks_integer:
        what = (
            "the prompt asks for an integer rating but states no scale this can read (such as "
            "'1 = poor and 7 = good' or 'from 1 to 10')"
        )
        fix = 'declare it: "responseContract": {"type": "rating", "minimum": 1, "maximum": 10}'
    else:
        what = "cannot tell the response contract from the prompt text"
        fix = (
            'add "responseContract": {"type": "number"|"rating"|"choice", ...} to the '
            "experiment (docs/jobs.md)"
        )
    return UserError(what, file=path, field=f"{where}.prompt", fix=fix)


def job_from_seed000(data: Any, path: Path, job_id: str) -> Job:
    spec: SeedSpec = validate(SeedSpec, data, path)
    seen: set[str] = set()
    experiments = []
    for i, exp in enumerate(spec.experiments):
        where = f"experiments[{i}]"
        if exp.experimentSlug in seen:
            raise UserError(
                f"duplicate experiment slug '{exp.experimentSlug}'",
                file=path,
                field=f"{where}.experimentSlug",
                fix="give every experiment its own slug",
            )
        seen.add(exp.experimentSlug)
        plausible = plausible_range(
            exp.plausibleRange,
            path,
            f"{where}.plausibleRange",
            numeric=exp.metric.type == "mean-difference",
        )
        conditions = []
        for j, cond in enumerate(exp.conditions):
            contract = _contract(exp, cond, f"{where}.conditions[{j}]", path)
            target = exp.metric.targetOption
            if contract.kind == "choice" and target not in contract.options:
                raise UserError(
                    f"targetOption {target!r} is not among the options {list(contract.options)}",
                    file=path,
                    field=f"{where}.metric.targetOption",
                    fix="make targetOption one of the exact option strings",
                )
            conditions.append(
                Condition(
                    index=j,
                    label=cond.label,
                    variants=(
                        Variant(
                            id="v1",
                            prompt=cond.prompt,
                            contract=contract,
                            contract_from="declared" if exp.responseContract else "prompt",
                            plausible_range=plausible,
                        ),
                    ),
                )
            )
        m = exp.metric
        metric = Metric(
            type=m.type,
            direction=m.direction,
            label=m.label,
            unit=m.unit,
            target_option=m.targetOption,
        )
        experiments.append(
            Experiment(
                slug=exp.experimentSlug,
                bias_slug=exp.biasSlug,
                metric=metric,
                conditions=tuple(conditions),
            )
        )
    p = spec.protocol
    return Job(
        id=job_id,
        title=spec.title,
        system_prompt=p.systemPrompt,
        min_samples=p.minimumSamplesPerCondition,
        deterministic_min_samples=p.deterministicMinimumSamplesPerCondition,
        recommended_temperature=p.recommendedTemperature,
        experiments=tuple(experiments),
        kind="paired",
    )

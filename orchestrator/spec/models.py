"""The general job model every benchmark format is read into.

job -> experiments -> conditions -> prompt variants, each variant with its response contract;
debiasing strategies are a separate dimension the planner crosses with all of them.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ContractKind = Literal["number", "rating", "choice", "judgment", "audit"]
MetricType = Literal[
    "mean-difference", "choice-share-difference", "prior-score-pull", "bsi", "bias-audit"
]
Direction = Literal["condition0-minus-condition1", "condition1-minus-condition0"]


# Study kinds renamed to the study's one name (0.2.0): manifests written before say the old one.
FORMER_KINDS = {"bsi": "bias-strength"}


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResponseContract(Frozen):
    """What a valid answer looks like: the JSON field and the values it may take.

    A judgment is an object with an integer `score` (minimum..maximum), a `verdict` among the
    options, and a `reason` string. An audit is the seed-003 judge's report on a reasoning
    trace, validated by its study (studies/trace_audit), which also owns how its calls are made."""

    kind: ContractKind = Field(
        description="number, rating (an integer in range), choice (one of the options), "
        "judgment (score, verdict, reason) or audit."
    )
    field: str = Field(default="value", description="The answer's JSON field.")
    minimum: int | None = Field(default=None, description="Lowest rating or judgment score.")
    maximum: int | None = Field(default=None, description="Highest rating or judgment score.")
    options: tuple[str, ...] = Field(
        default=(), description="The exact option strings of a choice (verdicts of a judgment)."
    )
    roles: tuple[str, ...] = Field(
        default=(),
        description="What each option stands for, scored instead of its position.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ResponseContract:
        if self.kind == "choice" and len(self.options) < 2:
            raise ValueError("a choice contract needs at least two options")
        if self.kind == "choice" and len(set(self.options)) != len(self.options):
            raise ValueError("choice options must be distinct")
        if self.roles and len(self.roles) != len(self.options):
            raise ValueError("give one role per option")
        if self.kind in ("rating", "judgment") and (
            self.minimum is None or self.maximum is None or self.minimum >= self.maximum
        ):
            raise ValueError(f"a {self.kind} contract needs minimum < maximum")
        if self.kind == "judgment" and len(self.options) < 2:
            raise ValueError("a judgment contract needs its verdict options")
        return self


class Variant(Frozen):
    """One wording of a condition's prompt."""

    id: str = Field(description="The variant's id, stable across runs (part of task ids).")
    prompt: str = Field(description="The user prompt.")
    contract: ResponseContract = Field(description="What a valid answer looks like.")
    contract_from: Literal["", "declared", "prompt"] = Field(
        default="",
        description="Where a benchmark-format contract came from: declared (the experiment's "
        "responseContract) or prompt (read from its wording); empty: the job format says it.",
    )
    domain: str = Field(default="", description="The scenario's domain (medical, financial...).")
    present_options: bool = Field(
        default=False,
        description="Shown by the planner after the prompt, in counterbalanced orders (native "
        "jobs); seed-000 prompts carry their options in their own text instead.",
    )
    predicted: str | None = Field(default=None, description="The role the bias predicts (choices).")
    anchor: float | None = Field(
        default=None, description="The bias-inducing reference value (numbers)."
    )
    item: dict[str, str | int | float | bool] | None = Field(
        default=None,
        description="A generated item's origin (templated jobs): its template, value-grid row "
        "and option order, the values put in, and the facts its scoring reads.",
    )
    instruction: str = Field(
        default="",
        description="How to state the answer, said after the prompt to a model that writes its "
        'answer; a model that answers by scoring options gets "Answer:" in its place.',
    )
    plausible_range: tuple[float, float] | None = Field(
        default=None,
        description="[low, high]: the answers to a number question that make sense (a job's "
        "`plausibleRange`). Answers outside are counted by the analysis, never dropped.",
    )

    @field_validator("plausible_range")
    @classmethod
    def _ordered(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not (math.isfinite(value[0]) and math.isfinite(value[1])):
            raise ValueError("a plausible range needs two finite numbers")
        if value is not None and value[0] >= value[1]:
            raise ValueError("a plausible range needs low < high")
        return value


class Condition(Frozen):
    """One arm of an experiment (control, treatment, ...), with its prompt variants."""

    index: int = Field(description="Its index in the experiment (0 first).")
    label: str = Field(description="How tables name it.")
    variants: tuple[Variant, ...] = Field(min_length=1, description="Its prompt variants.")


class Metric(Frozen):
    """How an experiment's effect is computed and signed."""

    type: MetricType = Field(description="The effect's measure.")
    direction: Direction = Field(
        default="condition0-minus-condition1", description="Which condition is subtracted."
    )
    label: str = Field(default="", description="What the effect is called.")
    unit: str = Field(default="", description="The unit of a number's effect.")
    target_option: str | None = Field(
        default=None, description="The option whose share a choice effect counts."
    )

    def signed(self, mean0: float, mean1: float) -> float:
        return mean0 - mean1 if self.direction == "condition0-minus-condition1" else mean1 - mean0


class JudgedItem(Frozen):
    """A fixed answer judged under a rubric (judge-history jobs): what the outcomes need."""

    question: str = Field(description="The question the judged answer answers.")
    rubric: str = Field(description="The rubric the judge scores by.")
    candidate_answer: str = Field(description="The fixed answer judged.")
    gold_score: int = Field(description="The study's reference score.")
    prior_score: int = Field(description="The earlier score shown under history-anchor.")
    prior_verdict: str = Field(description="The earlier verdict shown under history-anchor.")


class Shot(Frozen):
    """A worked example shown before the question (few-shot): its text and its answer."""

    prompt: str = Field(description="The example's question.")
    answer: str = Field(description="Its answer.")


class Experiment(Frozen):
    """One manipulation: its conditions, and how their difference is measured."""

    slug: str = Field(description="The experiment's id (`experimentSlug` in results).")
    bias_slug: str = Field(default="", description="The bias it probes.")
    metric: Metric = Field(description="How its effect is computed.")
    conditions: tuple[Condition, ...] = Field(min_length=1, description="Its conditions.")
    judged: JudgedItem | None = Field(
        default=None, description="The judged answer (judge-history jobs)."
    )
    format_shots: tuple[Shot, ...] = Field(
        default=(),
        description="Few-shot pool showing the answer format on neutral choices "
        '(shot_kind = "format").',
    )
    task_shots: tuple[Shot, ...] = Field(
        default=(),
        description='Few-shot pool of the same task in words no test item uses (shot_kind = "task").',
    )

    @property
    def bias_label(self) -> str:
        """How prompts and profiles name its bias (a strategy's "{bias}", an audit's profile)."""
        return self.metric.label or self.bias_slug or self.slug


class Strategy(Frozen):
    """A debiasing strategy: text added to the system prompt and/or the user prompt."""

    id: str = Field(description="The strategy's id (`strategy` in results).")
    system_prompt: str | None = Field(
        default=None, description="Replaces the job's system prompt when set."
    )
    user_suffix: str = Field(
        default="",
        description='Added after the user prompt; "{bias}" in it becomes the experiment\'s '
        "bias name.",
    )


BASELINE = Strategy(id="baseline")


class Job(Frozen):
    """The general job model every study's job format is read into (kept in the manifest)."""

    id: str = Field(description="The job's id: its file's stem.")
    title: str = Field(default="", description="Its title.")
    system_prompt: str = Field(description="The system prompt of every task.")
    min_samples: int = Field(ge=1, description="Samples per cell for a model that samples.")
    deterministic_min_samples: int | None = Field(
        default=None,
        ge=1,
        description="Samples per cell a deterministic model (temperature 0) needs: its "
        "repeated answers are one draw, not independent samples.",
    )
    recommended_temperature: float | None = Field(
        default=None, description="The temperature the job's protocol recommends."
    )
    experiments: tuple[Experiment, ...] = Field(min_length=1, description="Its experiments.")
    strategies: tuple[Strategy, ...] = Field(
        default=(BASELINE,), description="Its debiasing strategies (baseline alone by default)."
    )
    kind: str = Field(
        description="The registered study (studies/) whose analysis and exports apply."
    )

    @field_validator("kind", mode="before")
    @classmethod
    def _current_kind(cls, value: object) -> object:
        """A run started before a study took its folder's name is read under the new name."""
        return FORMER_KINDS.get(value, value) if isinstance(value, str) else value

    study_id: str | None = Field(default=None, description="The study's own id, if it has one.")
    spec_version: int | None = Field(default=None, description="The job format's version.")

    def min_samples_for(self, deterministic: bool) -> int:
        """The protocol's samples per cell for a model that samples, or for a deterministic one."""
        if deterministic and self.deterministic_min_samples is not None:
            return self.deterministic_min_samples
        return self.min_samples

    def experiment(self, slug: str) -> Experiment:
        for e in self.experiments:
            if e.slug == slug:
                return e
        raise KeyError(slug)

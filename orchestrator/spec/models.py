"""The general job model every benchmark format is read into.

job -> experiments -> conditions -> prompt variants, each variant with its response contract;
debiasing strategies are a separate dimension the planner crosses with all of them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ContractKind = Literal["number", "rating", "choice", "judgment", "audit"]
MetricType = Literal[
    "mean-difference", "choice-share-difference", "prior-score-pull", "bsi", "bias-audit"
]
Direction = Literal["condition0-minus-condition1", "condition1-minus-condition0"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResponseContract(Frozen):
    """What a valid answer looks like: the JSON field and the values it may take.

    A judgment is an object with an integer `score` (minimum..maximum), a `verdict` among the
    options, and a `reason` string. An audit is the seed-003 judge's report on a reasoning
    trace, validated by its study (studies/audit), which also owns how its calls are made."""

    kind: ContractKind
    field: str = "value"
    minimum: int | None = None  # rating bounds
    maximum: int | None = None
    options: tuple[str, ...] = ()  # exact option strings of a choice
    roles: tuple[str, ...] = ()  # what each option stands for, scored instead of its position

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

    id: str
    prompt: str
    contract: ResponseContract
    domain: str = ""
    # Shown by the planner after the prompt, in counterbalanced orders (native jobs); seed-000
    # prompts carry their options in their own text instead.
    present_options: bool = False
    predicted: str | None = None  # the role the bias predicts (choices)
    anchor: float | None = None  # the bias-inducing reference value (numbers)
    # A generated item's origin (templated jobs): its template, value-grid row and option order,
    # the values put in, and the facts its scoring reads. Recorded in the manifest with the job.
    item: dict[str, str | int | float | bool] | None = None
    # How to state the answer, said after the prompt to a model that writes its answer; a model
    # that answers by scoring options gets "Answer:" in its place (plan.render_scoring).
    instruction: str = ""


class Condition(Frozen):
    index: int
    label: str
    variants: tuple[Variant, ...] = Field(min_length=1)


class Metric(Frozen):
    type: MetricType
    direction: Direction = "condition0-minus-condition1"
    label: str = ""
    unit: str = ""
    target_option: str | None = None

    def signed(self, mean0: float, mean1: float) -> float:
        return mean0 - mean1 if self.direction == "condition0-minus-condition1" else mean1 - mean0


class JudgedItem(Frozen):
    """A fixed answer judged under a rubric (judge-history jobs): what the outcomes need."""

    question: str
    rubric: str
    candidate_answer: str
    gold_score: int
    prior_score: int
    prior_verdict: str


class Shot(Frozen):
    """A worked example shown before the question (few-shot): its text and its answer."""

    prompt: str
    answer: str


class Experiment(Frozen):
    slug: str
    bias_slug: str = ""
    metric: Metric
    conditions: tuple[Condition, ...] = Field(min_length=1)
    judged: JudgedItem | None = None
    # Few-shot pools the planner draws a campaign's `shots` from: `format` shows the answer
    # format on neutral choices, `task` the same task in words no test item uses.
    format_shots: tuple[Shot, ...] = ()
    task_shots: tuple[Shot, ...] = ()

    @property
    def bias_label(self) -> str:
        """How prompts and profiles name its bias (a strategy's "{bias}", an audit's profile)."""
        return self.metric.label or self.bias_slug or self.slug


class Strategy(Frozen):
    """A debiasing strategy: text added to the system prompt and/or the user prompt."""

    id: str
    system_prompt: str | None = None  # replaces the job's system prompt when set
    user_suffix: str = ""  # "{bias}" in it becomes the experiment's bias name


BASELINE = Strategy(id="baseline")


class Job(Frozen):
    id: str
    title: str = ""
    system_prompt: str
    min_samples: int = Field(ge=1)
    # Samples per cell a deterministic model (temperature 0) needs: its repeated answers are one
    # draw, not independent samples (seed 000's deterministicMinimumSamplesPerCondition).
    deterministic_min_samples: int | None = Field(default=None, ge=1)
    recommended_temperature: float | None = None
    experiments: tuple[Experiment, ...] = Field(min_length=1)
    strategies: tuple[Strategy, ...] = (BASELINE,)
    kind: str  # the registered study (studies/) whose analysis and exports apply
    study_id: str | None = None
    spec_version: int | None = None

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

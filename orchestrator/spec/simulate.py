"""Settings of the simulated respondent: answer distributions per experiment and condition."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Unknown fields are typos, and strict types: `refusal_rate = true` is a mistake, not 1.
STRICT = ConfigDict(extra="forbid", strict=True)


class ConditionAnswers(BaseModel):
    """Numbers/ratings ~ Normal(mean, sd) (ratings rounded and clipped); choices by shares."""

    model_config = STRICT
    mean: float | None = Field(
        default=None,
        description="Mean of the numbers and ratings drawn; unset: the rating scale's midpoint "
        "(100 for numbers).",
    )
    sd: float = Field(
        default=1.0, ge=0, description="Standard deviation of the numbers and ratings drawn."
    )
    shares: dict[str, float] = Field(
        default={},
        description="Option text or role -> probability of choosing it; the rest spread evenly.",
    )


class ExperimentAnswers(BaseModel):
    model_config = STRICT
    conditions: list[ConditionAnswers] = Field(
        default=[],
        description="The answers of each condition, in the experiment's order of conditions; "
        "a condition past the end gets the defaults.",
    )
    variants: dict[str, list[ConditionAnswers]] = Field(
        default={}, description="Per-condition answers by variant id; wins over `conditions`."
    )
    served_model: str | None = Field(
        default=None,
        description="The model string its answers name (default: the model's).",
    )


class Drift(BaseModel):
    """A provider changing the model behind the name, unannounced: from the run whose id sorts
    at or after `from_run` (run ids from --run-id auto are dates), these experiments are answered
    as given here instead (each replaces that experiment's settings), and every answer names
    `served_model` / `system_fingerprint` when set; parse errors and refusals come at the rates
    given here, when set. Run ids are compared as text, so give ids that sort in time (the
    dates --run-id auto gives: "n10" sorts before "n2"). For rehearsing what `compare` flags."""

    model_config = STRICT
    from_run: str = Field(
        min_length=1, description="The first run id (compared as text) the drift applies to."
    )
    effects: dict[str, ExperimentAnswers] = Field(
        default={},
        description="By experiment slug: answers replacing that experiment's settings.",
    )
    served_model: str | None = Field(
        default=None, description="The model string every answer names from then on."
    )
    system_fingerprint: str | None = Field(
        default=None, description="The backend build every answer names from then on."
    )
    parse_error_rate: float | None = Field(
        default=None, ge=0, le=1, description="Replaces the model's `parse_error_rate`."
    )
    refusal_rate: float | None = Field(
        default=None, ge=0, le=1, description="Replaces the model's `refusal_rate`."
    )


class JudgeAnswers(BaseModel):
    """A simulated judge: scores ~ Normal(gold, sd), rounded and clipped; under history-anchor
    the mean moves `pull` of the way from gold to the displayed prior score (under
    history-framing, `framing_pull` of the way)."""

    model_config = STRICT
    pull: float = Field(
        default=0.0,
        ge=-1,
        le=1,
        description="Under history-anchor: the share of the way the mean moves from the gold "
        "score to the displayed prior score.",
    )
    framing_pull: float = Field(
        default=0.0,
        ge=-1,
        le=1,
        description="The same as `pull`, under history-framing.",
    )
    sd: float = Field(default=0.6, ge=0, description="Standard deviation of the scores drawn.")
    inconsistent_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="The chance the verdict contradicts the score.",
    )


# The biases a seed-003 audit scores (studies/trace_audit/validate.BIAS_TYPES): what `miss` and
# `cues` are keyed by. A key that is not one of them would plant nothing, silently.
AUDIT_BIASES = ("Anchoring", "Confirmation", "Availability", "Representativeness")


def _audit_biases(table: dict[str, Any]) -> dict[str, Any]:
    for key in table:
        if key not in AUDIT_BIASES:
            close = [b for b in AUDIT_BIASES if b.lower() == key.lower()]
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ValueError(
                f"'{key}' is not a bias of the audit: {hint}use {', '.join(AUDIT_BIASES)}"
            )
    return table


class AuditAnswers(BaseModel):
    """A simulated trace-audit judge (seed 003). Per bias it gives the trace's reference score
    (golden traces) with probability `agreement`, else one point off at random (clipped to
    1-5); a trace without reference labels scores `default_score`. `miss`: per bias, the chance
    a bias the reference flags is scored 4 instead (a judge that stopped catching it).
    `invalid_rate`: the chance an output fails validation (a quote not in the trace, a bias
    left out, a flag that contradicts the scores), drawn anew for the retry."""

    model_config = STRICT
    agreement: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="The chance a bias gets the trace's reference score, else one point off.",
    )
    default_score: int = Field(
        default=4, ge=1, le=5, description="The score of a trace without reference labels."
    )
    miss: dict[str, float] = Field(
        default={},
        description="Per bias: the chance a bias the reference flags is scored 4 instead.",
    )
    invalid_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="The chance an output fails validation, drawn anew for the retry.",
    )
    cues: dict[str, str] = Field(
        default={},
        description="Per bias: words that, found in a trace, make it score `cue_score` there "
        "(a judge that reads the reasoning, as a real one would, rather than its labels).",
    )
    cue_score: int = Field(default=2, ge=1, le=5, description="The score a bias's cue gives.")

    @field_validator("miss", "cues")
    @classmethod
    def _keyed_by_biases(cls, table: dict[str, Any]) -> dict[str, Any]:
        return _audit_biases(table)


class ReasoningAnswers(BaseModel):
    """How a simulated reasoning model's trace reads (`reasoning = true` on the model): a few
    steps, kept apart from its answer like a reasoning model's own thinking. In `anchored`
    (by experiment slug, per condition) a share of traces take the figure in the question as
    their starting point (ANCHORED_STEP), the rest set it aside: an anchoring a judge can find
    in the text, planted by condition, for rehearsing `audit` on native traces."""

    model_config = STRICT
    anchored: dict[str, list[float]] = Field(
        default={},
        description="By experiment slug, per condition: the chance a trace takes the figure "
        "in the question as its starting point.",
    )


ANCHORED_STEP = "The question gives a figure; I take it as my starting point and adjust from it."
UNANCHORED_STEP = "I set any figure in the question aside and reason from what such cases come to."


class SimulateConfig(BaseModel):
    model_config = STRICT
    seed: int = Field(
        default=0,
        description="Another seed draws other answers: independent replications of one design.",
    )
    latency_ms: float = Field(
        default=0.0, ge=0, description="How long each answer takes, in milliseconds."
    )
    parse_error_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="The chance an answer is text that does not parse.",
    )
    refusal_rate: float = Field(
        default=0.0, ge=0, le=1, description="The chance a call is refused."
    )
    effects: dict[str, ExperimentAnswers] = Field(
        default={}, description="The planted answers, by experiment slug."
    )
    judge: JudgeAnswers = Field(
        default=JudgeAnswers(), description="How it answers a judge prompt."
    )
    first_position_bias: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Extra weight on whichever option is listed first: a position bias that "
        "option-order counterbalancing must cancel out.",
    )
    scoring_prior: dict[str, float] = Field(
        default={},
        description='answers = "score": log-probability added to an option (by its text) after '
        "any prompt and after the premise alone: a prior for the answer's words that DC-PMI "
        "must take out.",
    )
    audit: AuditAnswers | None = Field(
        default=None, description="How it answers the trace audit's judge prompt."
    )
    draws: Literal["task", "run"] = Field(
        default="task",
        description='"task": a task\'s answer is fixed by its id (a resumed or repeated run '
        'draws the same); "run": each run draws anew (seeded by run id and task id), as a '
        "sampling model does from one night to the next, while a resumed run still draws what "
        "it drew.",
    )
    system_fingerprint: str | None = Field(
        default=None, description="What its answers name as the backend build."
    )
    drift: list[Drift] = Field(
        default=[], description="Changes of the model behind the name, from a given run on."
    )
    reasoning: ReasoningAnswers = Field(
        default=ReasoningAnswers(),
        description="How its reasoning traces read, when the model has `reasoning = true`.",
    )

    def identity(self) -> dict:
        """Its settings as part of the model's identity; a newer field at its default is left
        out, so task ids of runs made before it existed stay the same."""
        unset = {
            name
            for name in ("scoring_prior", "audit", "system_fingerprint", "drift")
            if not getattr(self, name)
        } | ({"draws"} if self.draws == "task" else set())
        if not self.reasoning.anchored:
            unset.add("reasoning")
        exclude: dict = dict.fromkeys(unset, True)
        if self.audit is not None and not self.audit.cues:
            exclude["audit"] = {"cues", "cue_score"}
        if not any(e.served_model for e in self.effects.values()):
            exclude["effects"] = {"__all__": {"served_model"}}
        return self.model_dump(exclude=exclude or None)

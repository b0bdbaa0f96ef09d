"""Settings of the simulated respondent: answer distributions per experiment and condition."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Unknown fields are typos, and strict types: `refusal_rate = true` is a mistake, not 1.
STRICT = ConfigDict(extra="forbid", strict=True)


class ConditionAnswers(BaseModel):
    """Numbers/ratings ~ Normal(mean, sd) (ratings rounded and clipped); choices by shares."""

    model_config = STRICT
    mean: float | None = None
    sd: float = Field(default=1.0, ge=0)
    shares: dict[str, float] = {}  # option text or role -> probability; the rest spread evenly


class ExperimentAnswers(BaseModel):
    model_config = STRICT
    conditions: list[ConditionAnswers] = []
    variants: dict[str, list[ConditionAnswers]] = {}  # by variant id; wins over `conditions`
    served_model: str | None = None  # the model string its answers name (default: the model's)


class Drift(BaseModel):
    """A provider changing the model behind the name, unannounced: from the run whose id sorts
    at or after `from_run` (run ids from --run-id auto are dates), these experiments are answered
    as given here instead (each replaces that experiment's settings), and every answer names
    `served_model` / `system_fingerprint` when set; parse errors and refusals come at the rates
    given here, when set. Run ids are compared as text, so give ids that sort in time (the
    dates --run-id auto gives: "n10" sorts before "n2"). For rehearsing what `compare` flags."""

    model_config = STRICT
    from_run: str = Field(min_length=1)
    effects: dict[str, ExperimentAnswers] = {}
    served_model: str | None = None
    system_fingerprint: str | None = None
    parse_error_rate: float | None = Field(default=None, ge=0, le=1)  # replaces the model's
    refusal_rate: float | None = Field(default=None, ge=0, le=1)


class JudgeAnswers(BaseModel):
    """A simulated judge: scores ~ Normal(gold, sd), rounded and clipped; under history-anchor
    the mean moves `pull` of the way from gold to the displayed prior score (under
    history-framing, `framing_pull` of the way)."""

    model_config = STRICT
    pull: float = Field(default=0.0, ge=-1, le=1)
    framing_pull: float = Field(default=0.0, ge=-1, le=1)
    sd: float = Field(default=0.6, ge=0)
    inconsistent_rate: float = Field(default=0.0, ge=0, le=1)  # verdict contradicts the score


class AuditAnswers(BaseModel):
    """A simulated trace-audit judge (seed 003). Per bias it gives the trace's reference score
    (golden traces) with probability `agreement`, else one point off at random (clipped to
    1-5); a trace without reference labels scores `default_score`. `miss`: per bias, the chance
    a bias the reference flags is scored 4 instead (a judge that stopped catching it).
    `invalid_rate`: the chance an output fails validation (a quote not in the trace, a bias
    left out, a flag that contradicts the scores), drawn anew for the retry."""

    model_config = STRICT
    agreement: float = Field(default=0.8, ge=0, le=1)
    default_score: int = Field(default=4, ge=1, le=5)
    miss: dict[str, float] = {}
    invalid_rate: float = Field(default=0.0, ge=0, le=1)


class SimulateConfig(BaseModel):
    model_config = STRICT
    seed: int = 0  # another seed draws other answers: independent replications of one design
    latency_ms: float = Field(default=0.0, ge=0)
    parse_error_rate: float = Field(default=0.0, ge=0, le=1)
    refusal_rate: float = Field(default=0.0, ge=0, le=1)
    effects: dict[str, ExperimentAnswers] = {}  # by experiment slug
    judge: JudgeAnswers = JudgeAnswers()
    # Extra weight (0..1) on whichever option is listed first: a position bias that option-order
    # counterbalancing must cancel out.
    first_position_bias: float = Field(default=0.0, ge=0, le=1)
    # answers = "score": log-probability added to an option (by its text) after any prompt and
    # after the premise alone: a prior for the answer's words that DC-PMI must take out.
    scoring_prior: dict[str, float] = {}
    audit: AuditAnswers | None = None  # how it answers the trace audit's judge prompt
    # "task": a task's answer is fixed by its id (a resumed or repeated run draws the same);
    # "run": each run draws anew (seeded by run id and task id), as a sampling model does from
    # one night to the next, while a resumed run still draws what it drew.
    draws: Literal["task", "run"] = "task"
    system_fingerprint: str | None = None  # what its answers name as the backend build
    drift: list[Drift] = []

    def identity(self) -> dict:
        """Its settings as part of the model's identity; a newer field at its default is left
        out, so task ids of runs made before it existed stay the same."""
        unset = {
            name
            for name in ("scoring_prior", "audit", "system_fingerprint", "drift")
            if not getattr(self, name)
        } | ({"draws"} if self.draws == "task" else set())
        exclude: dict = dict.fromkeys(unset, True)
        if not any(e.served_model for e in self.effects.values()):
            exclude["effects"] = {"__all__": {"served_model"}}
        return self.model_dump(exclude=exclude or None)

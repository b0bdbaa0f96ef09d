"""What a plan will take before it runs: tokens, cost and duration per model at the limits."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from orchestrator.plan import Plan
from orchestrator.pricing import FREE_PROVIDERS, TURNAROUND, TYPICAL_ANSWER_TOKENS, Price
from orchestrator.spec import reasoning


@dataclass
class ModelEstimate:
    label: str
    key: str
    limit_key: str
    calls: int = 0
    input_tokens: int = 0
    output_typical: int = 0
    output_max: int = 0
    price: Price | None = None
    free: bool = False  # a local or simulated model: it costs nothing, price or not
    batch: bool = False  # sent through the provider's batch API, at its batch price
    turnaround: str | None = None  # what the provider promises for a batch
    reasoning_tokens: int = 0  # a reasoning model's allowance a call, within output_typical
    reasoning_basis: str = ""  # what the allowance was chosen by (its effort or budget)

    @property
    def cost(self) -> float | None:
        return self.price.cost(self.input_tokens, self.output_typical) if self.price else None

    @property
    def cost_max(self) -> float | None:
        return self.price.cost(self.input_tokens, self.output_max) if self.price else None

    def scaled(self, share: float) -> ModelEstimate:
        """The part of this estimate still to run."""
        return ModelEstimate(
            self.label,
            self.key,
            self.limit_key,
            round(self.calls * share),
            round(self.input_tokens * share),
            round(self.output_typical * share),
            round(self.output_max * share),
            self.price,
            self.free,
            self.batch,
            self.turnaround,
            self.reasoning_tokens,
            self.reasoning_basis,
        )


def estimate(plan: Plan) -> dict[str, ModelEstimate]:
    out: dict[str, ModelEstimate] = {}
    allowed: set[str] = set()  # the models whose reasoning allowance is found
    for cell in plan.cells:
        m = cell.model
        e = out.setdefault(
            m.key,
            ModelEstimate(
                m.label,
                m.key,
                m.limit_key,
                price=m.price_for(m.batch),
                free=m.provider in FREE_PROVIDERS,
                batch=m.batch,
                turnaround=TURNAROUND.get(m.provider) if m.batch else None,
            ),
        )
        calls = cell.samples * cell.calls_per_task
        e.calls += calls
        e.input_tokens += calls * cell.prompt_estimate
        if cell.scored:  # a scoring call writes one token, which is not read
            e.output_typical += calls
            e.output_max += calls
        else:
            answer = min(m.max_tokens, TYPICAL_ANSWER_TOKENS)
            # A reasoning model bills its thinking as output: often ten times the answer.
            if m.key not in allowed:  # once per model, not per cell (a chat model has none)
                allowed.add(m.key)
                e.reasoning_tokens, e.reasoning_basis = reasoning.allowance(m, answer)
            e.output_typical += calls * (answer + e.reasoning_tokens)
            e.output_max += calls * m.max_tokens
    return out


def remaining(plan: Plan, done_by_model: dict[str, int]) -> dict[str, ModelEstimate]:
    per_model = plan.per_model()
    return {
        k: e.scaled(1 - done_by_model.get(k, 0) / per_model[k]) for k, e in estimate(plan).items()
    }


def durations(plan: Plan, estimates: dict[str, ModelEstimate]) -> dict[str, float | None]:
    """Seconds each limit key needs at its configured rpm/tpm for its online models (None: no
    limit bounds it, so it depends on latency and max_in_flight)."""
    calls: dict[str, int] = defaultdict(int)
    tokens: dict[str, int] = defaultdict(int)
    for e in estimates.values():
        if e.batch:  # its turnaround is the provider's (ModelEstimate.turnaround), not the rate's
            continue
        calls[e.limit_key] += e.calls
        tokens[e.limit_key] += e.input_tokens + e.output_typical
    out = {}
    for key in calls:
        limit = plan.campaign.config.limit_for(key)
        bounds = [
            calls[key] / limit.rpm * limit.period_s if limit.rpm else None,
            tokens[key] / limit.tpm * limit.period_s if limit.tpm else None,
        ]
        known = [b for b in bounds if b is not None]
        out[key] = max(known) if known else None
    return out


def total_cost(estimates: dict[str, ModelEstimate]) -> float:
    return sum(e.cost or 0.0 for e in estimates.values())

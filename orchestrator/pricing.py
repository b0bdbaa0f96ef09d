"""What calls cost: a price per million input and output tokens, applied to reported usage."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# Output tokens a JSON answer under a response contract typically takes. Estimates and the budget
# check use it; `plan` also shows the ceiling at max_tokens. The actual spend, from the usage the
# server reports, is what stops a run at its budget.
TYPICAL_ANSWER_TOKENS = 16
# Providers whose calls cost nothing: no price is needed, and estimates show them as free.
FREE_PROVIDERS = ("local", "simulated")
# When a batch API promises results (the plan shows it; batch/api.py).
TURNAROUND = {
    "openai": "within 24 hours",
    "anthropic": "within 24 hours (most within 1 hour)",
    "gemini": "within 24 hours",
}


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(ge=0, description="USD per million input tokens.")
    output: float = Field(ge=0, description="USD per million output tokens.")

    def scaled(self, share: float) -> Price:
        return Price(input=self.input * share, output=self.output * share)

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1e6


def close_names(name: str, priced: list[str]) -> list[str]:
    """The names in a price table close to a model's name that has no price in it: a
    misspelled model would otherwise plan at $0 with no hint of the name it meant."""
    from difflib import get_close_matches

    return get_close_matches(name, priced, n=3, cutoff=0.75)


def did_you_mean(close: list[str]) -> str:
    return "did you mean " + " or ".join(f"'{c}'" for c in close) + "?"


def usage_cost(price: Price | None, usage: dict | None) -> float | None:
    """USD for one call's reported usage; None when the model has no price or no usage came."""
    if price is None or not usage or usage.get("prompt_tokens") is None:
        return None
    return price.cost(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0)

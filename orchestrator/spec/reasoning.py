"""Reasoning models: which they are, what their APIs refuse, and what they may cost.

They think before they answer, and bill the thinking as output: OpenAI's o-series and gpt-5
(sent `max_completion_tokens` and `reasoning_effort`, never a temperature), Claude with extended
thinking and Gemini thinking models (`thinking_budget`), DeepSeek-R1 and its open relatives
behind an OpenAI-compatible server (chat requests, a `reasoning_content` field in the answer).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.spec.campaign import ModelConfig

EFFORTS = ("minimal", "low", "medium", "high")
# OpenAI's reasoning families, as named by OpenAI or behind a gateway ("openai/o4-mini"); the
# gpt-5 chat models (gpt-5-chat-latest) are no reasoning models.
_OPENAI_REASONING = re.compile(r"^(?:openai/)?(?:o[1-9]|gpt-5(?!-chat))", re.I)
# Open reasoning models behind OpenAI-compatible servers: they take chat requests as they are.
_OPEN_REASONING = re.compile(r"reasoner|(?:^|[/-])r1(?:$|[-:])|qwq|thinking", re.I)
# Gemini's thinking models think by default, within maxOutputTokens.
_GEMINI_THINKING = re.compile(r"^gemini-(?:2\.5|[3-9])", re.I)
ANTHROPIC_MIN_BUDGET = 1024  # the Messages API refuses a smaller budget_tokens

# Reasoning tokens a call typically spends, by effort: `plan` and `--budget` count them as
# output beside the answer's own. Rough figures for short benchmark questions (a model can
# spend far more); the ceiling at max_tokens is shown beside them.
EFFORT_ALLOWANCE = {"minimal": 64, "low": 512, "medium": 1536, "high": 4096}
DEFAULT_EFFORT = "medium"  # what OpenAI uses when none is sent


def openai_reasoning(model: ModelConfig) -> bool:
    """Whether an `openai` model gets the reasoning request shape: known by name, or
    `reasoning = true` (`reasoning = false` keeps a chat shape for a name that looks like one)."""
    if model.provider != "openai":
        return False
    if model.reasoning is not None:
        return model.reasoning
    return bool(_OPENAI_REASONING.match(model.name or ""))


def reasons(model: ModelConfig) -> bool:
    """Whether the model spends output tokens thinking before it answers."""
    if model.provider == "openai":
        return openai_reasoning(model) or (
            model.reasoning is None and bool(_OPEN_REASONING.search(model.name or ""))
        )
    if model.provider == "anthropic":
        return bool(model.thinking_budget)
    if model.provider == "gemini":
        if model.thinking_budget is not None:
            return model.thinking_budget != 0
        return bool(_GEMINI_THINKING.match(model.name or ""))
    return bool(model.reasoning)  # the simulated respondent writes traces when asked


def allowance(model: ModelConfig, answer_tokens: int) -> tuple[int, str]:
    """Reasoning tokens a call is expected to spend, and how that figure was chosen. Thinking
    counts within max_tokens on every API, so it is capped there, less the answer's share."""
    if not reasons(model):
        return 0, ""
    budget = model.thinking_budget
    if budget is not None and budget > 0:
        tokens, why = budget, f"thinking_budget {budget:,}"
    elif openai_reasoning(model):
        effort = model.reasoning_effort or DEFAULT_EFFORT
        tokens = EFFORT_ALLOWANCE[effort]
        why = f"reasoning_effort {effort}" + ("" if model.reasoning_effort else " (default)")
    else:  # it thinks as long as it likes: a medium effort's figure
        tokens, why = EFFORT_ALLOWANCE[DEFAULT_EFFORT], "no budget set: a medium effort's figure"
    room = model.max_tokens - answer_tokens
    if tokens > room:
        why += (
            f"; max_tokens {model.max_tokens} may leave no room for the answer: raise it to "
            f"about {tokens + answer_tokens:,} or more"
        )
    return max(0, min(tokens, room)), why


def _openai_problems(model: ModelConfig) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    if openai_reasoning(model):
        for field, value in (("temperature", model.temperature), ("top_p", model.top_p)):
            if value is not None and value != 1:
                out.append(
                    (
                        field,
                        f"'{model.name}' is a reasoning model: the API refuses a {field} other "
                        "than 1, and dropping it silently would change the design",
                        f"remove {field} from this model (reasoning models sample at 1)",
                    )
                )
        if model.reasoning_effort == "minimal" and not re.match(
            r"^(?:openai/)?gpt-5", model.name or "", re.I
        ):
            out.append(
                (
                    "reasoning_effort",
                    "reasoning_effort 'minimal' is for the gpt-5 family only",
                    "use low, medium or high",
                )
            )
    elif model.reasoning_effort is not None:
        out.append(
            (
                "reasoning_effort",
                f"'{model.name}' is not known as a reasoning model, and a chat model refuses "
                "reasoning_effort",
                "set reasoning = true if it is a reasoning model, or remove reasoning_effort",
            )
        )
    if model.thinking_budget is not None:
        out.append(
            (
                "thinking_budget",
                "thinking_budget is for providers anthropic and gemini",
                "for an OpenAI reasoning model set reasoning_effort instead",
            )
        )
    return out


def _anthropic_problems(model: ModelConfig) -> list[tuple[str, str, str]]:
    budget = model.thinking_budget
    out: list[tuple[str, str, str]] = []
    if budget is None:
        return out
    if budget < ANTHROPIC_MIN_BUDGET:
        out.append(
            (
                "thinking_budget",
                f"thinking_budget {budget} is below the {ANTHROPIC_MIN_BUDGET:,} tokens the "
                "Messages API accepts",
                f"set thinking_budget to at least {ANTHROPIC_MIN_BUDGET:,}",
            )
        )
    if model.max_tokens <= budget:
        out.append(
            (
                "max_tokens",
                f"max_tokens {model.max_tokens} must be more than thinking_budget {budget}: "
                "thinking counts within max_tokens",
                f"set max_tokens above {budget} (the answer's room is max_tokens - budget)",
            )
        )
    if model.temperature is not None and model.temperature != 1:
        out.append(
            (
                "temperature",
                "with thinking, the Messages API accepts temperature 1 only, and dropping it "
                "silently would change the design",
                "remove temperature from this model (or set it to 1)",
            )
        )
    if model.top_p is not None and model.top_p < 0.95:
        out.append(
            (
                "top_p",
                "with thinking, the Messages API accepts top_p from 0.95 to 1 only",
                "remove top_p or set it to at least 0.95",
            )
        )
    return out


def problems(model: ModelConfig) -> list[tuple[str, str, str]]:
    """(field, what is wrong, fix) of a model's reasoning settings against its provider."""
    if model.provider == "openai":
        return _openai_problems(model)
    out: list[tuple[str, str, str]] = []
    if model.provider == "anthropic":
        out += _anthropic_problems(model)
    if model.reasoning is not None and model.provider in ("anthropic", "gemini", "local"):
        out.append(
            (
                "reasoning",
                f"reasoning applies to providers openai and simulated, not '{model.provider}'",
                "for Claude or Gemini set thinking_budget; remove reasoning",
            )
        )
    if model.reasoning_effort is not None:
        out.append(
            (
                "reasoning_effort",
                f"reasoning_effort is OpenAI's; provider '{model.provider}' does not take it",
                "for Claude or Gemini set thinking_budget instead",
            )
        )
    if model.thinking_budget is not None and model.provider not in ("anthropic", "gemini"):
        out.append(
            (
                "thinking_budget",
                f"thinking_budget is for providers anthropic and gemini, not '{model.provider}'",
                "remove thinking_budget",
            )
        )
    return out

"""Reasoning models on the emulator, as the real APIs serve them.

OpenAI's reasoning models (o-series, gpt-5, or any name in EmulatorConfig.reasoning_models)
refuse `max_tokens`, a temperature or top_p other than 1 and an unknown reasoning_effort, spend
hidden reasoning tokens inside max_completion_tokens and count them in usage. OpenAI-compatible
reasoning servers (DeepSeek-R1, deepseek-reasoner, vLLM's reasoning parser) return the trace in
`message.reasoning_content`, OpenRouter in `message.reasoning` and `reasoning_details`.
Anthropic's extended thinking checks its budget and sampling parameters and answers with a
thinking block first; its structured outputs in the beta's shape (`output_format`) need the
beta's header (GA's `output_config.format` needs none). Gemini's thinkingConfig
sets the thoughts' budget and whether they are shown as parts marked `thought`.

The trace a visible reasoning shows comes from EmulatorConfig.reasoner, else from `trace`.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.emulator.answers import tokens

if TYPE_CHECKING:
    from orchestrator.emulator.protocols import Call, Protocol
    from orchestrator.emulator.server import EmulatorConfig

CHAT_ROUTE = "/v1/chat/completions"
EFFORTS = {"minimal": 0.0, "low": 0.5, "medium": 1.0, "high": 2.0}
STRUCTURED_OUTPUTS_BETA = "structured-outputs-2025-11-13"
MIN_BUDGET = 1024
DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_OPENAI_REASONING = re.compile(r"^(o[1-9]|gpt-5)", re.I)
_R1 = re.compile(r"(^|[/-])r1($|[-:])")
_NUMBER = re.compile(r"(?:[€$£¥]\s?)?(?<![A-Za-z_\d])-?\d+(?:[.,]\d+)*%?")


# --- which models reason --------------------------------------------------------------------
def openai_reasoning(model: str, config: EmulatorConfig) -> bool:
    """An OpenAI reasoning model: o1..o9*, gpt-5* (not gpt-5-chat*), or one the config names."""
    name = model.removeprefix("openai/")
    if model in config.reasoning_models or name in config.reasoning_models:
        return True
    return bool(_OPENAI_REASONING.match(name)) and not name.lower().startswith("gpt-5-chat")


def r1_style(model: str) -> bool:
    """A reasoning model served OpenAI-compatibly with its trace shown (DeepSeek-R1 and kin)."""
    name = model.lower()
    return "reasoner" in name or bool(_R1.search(name))


def _chat(proto: Protocol) -> bool:
    return proto.name == "openai" and proto.route == CHAT_ROUTE


# --- the provider's 400s --------------------------------------------------------------------
def _openai_error(message: str, param: str | None, code: str | None) -> tuple[int, dict]:
    return 400, {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def _anthropic_error(message: str) -> tuple[int, dict]:
    return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _set(body: dict[str, Any], key: str) -> bool:
    return body.get(key) is not None


def refuse(
    proto: Protocol, call: Call, body: dict[str, Any], config: EmulatorConfig
) -> tuple[int, dict[str, Any]] | None:
    """The 400 the real API gives a reasoning request it will not serve, or None."""
    if _chat(proto):
        return _refuse_openai(call.model, body, config)
    if proto.name == "anthropic":
        return _refuse_anthropic(call, body)
    return None


def _refuse_openai(model: str, body: dict[str, Any], config: EmulatorConfig):
    effort = body.get("reasoning_effort")
    if not openai_reasoning(model, config):
        if effort is not None and not r1_style(model):
            return _openai_error(
                "Unrecognized request argument supplied: reasoning_effort", None, None
            )
        return None
    if _set(body, "max_tokens"):
        return _openai_error(
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    if _set(body, "temperature") and body["temperature"] != 1:
        return _openai_error(
            f"Unsupported value: 'temperature' does not support {body['temperature']!r} with "
            "this model. Only the default (1) value is supported.",
            "temperature",
            "unsupported_value",
        )
    if _set(body, "top_p") and body["top_p"] != 1:
        return _openai_error(
            "Unsupported parameter: 'top_p' is not supported with this model.",
            "top_p",
            "unsupported_parameter",
        )
    if effort is not None and (not isinstance(effort, str) or effort not in EFFORTS):
        return _openai_error(
            f"Invalid value: {effort!r}. Supported values are: 'minimal', 'low', 'medium', "
            "and 'high'.",
            "reasoning_effort",
            "invalid_value",
        )
    return None


def _refuse_anthropic(call: Call, body: dict[str, Any]):
    if _set(body, "output_format") and STRUCTURED_OUTPUTS_BETA not in call.betas:
        return _anthropic_error("output_format: Extra inputs are not permitted")
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if budget is None:
        return _anthropic_error("thinking.enabled.budget_tokens: Field required")
    if not isinstance(budget, int) or budget < MIN_BUDGET:
        return _anthropic_error(
            f"thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_BUDGET}"
        )
    if call.max_tokens <= budget:
        return _anthropic_error(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {DOCS}#max-tokens-and-context-window-size"
        )
    if _set(body, "temperature") and body["temperature"] != 1:
        return _anthropic_error(
            "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. "
            "Please consult our documentation at "
            "https://platform.claude.com/docs/en/build-with-claude/extended-thinking"
        )
    top_p = body.get("top_p")
    if isinstance(top_p, int | float) and top_p < 0.95:
        return _anthropic_error(
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled."
        )
    return None


# --- how an answer reasons ------------------------------------------------------------------
@dataclass
class Plan:
    """How one call reasons. style: openai (hidden), reasoning_content, openrouter, anthropic,
    gemini. tokens: the hidden reasoning's (openai) or Gemini's thoughts; a shown trace counts
    its own. limit: OpenAI's max_completion_tokens, if sent."""

    style: str
    tokens: int = 0
    visible: bool = True
    limit: int | None = None

    @property
    def traced(self) -> bool:
        """Whether the answer has a trace (OpenRouter's excluded reasoning is still spent)."""
        return self.visible or self.style == "openrouter"


def plan(proto: Protocol, call: Call, body: dict[str, Any], config: EmulatorConfig) -> Plan | None:
    """How the call reasons, or None for an answer without reasoning (Gemini: as
    EmulatorConfig.thoughts_tokens says)."""
    if _chat(proto):
        if openai_reasoning(call.model, config):
            sent = body.get("reasoning_effort")
            effort = EFFORTS.get(sent if isinstance(sent, str) else "medium", 1.0)
            limit = body.get("max_completion_tokens")
            limit = None if limit is None else int(limit)
            return Plan("openai", round(config.reasoning_tokens * effort), False, limit)
        if not r1_style(call.model):
            return None
        opts = body.get("reasoning")
        if isinstance(opts, dict) or body.get("include_reasoning") is not None:
            shown = not (isinstance(opts, dict) and opts.get("exclude"))
            return Plan("openrouter", visible=shown and body.get("include_reasoning") is not False)
        return Plan("reasoning_content")
    if proto.name == "anthropic":
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            return Plan("anthropic")
        return None
    if proto.name == "gemini":
        config_ = (body.get("generationConfig") or {}).get("thinkingConfig")
        if not isinstance(config_, dict):
            return None
        budget = config_.get("thinkingBudget", -1)
        budget = budget if isinstance(budget, int) else -1
        default = config.thoughts_tokens or 128
        thoughts = 0 if budget == 0 else default if budget < 0 else min(budget, default)
        return Plan("gemini", thoughts, bool(config_.get("includeThoughts")) and thoughts > 0)
    return None


def trace_of(config: EmulatorConfig, protocol: str, body: dict[str, Any], prompt: str) -> str:
    """The call's trace: the reasoner hook's, else the default one of its user `prompt`."""
    hook = config.reasoner
    return (hook(protocol, body) if hook else None) or trace(prompt)


def trace(prompt: str) -> str:
    """The default reasoning trace: deterministic, driven by the prompt, four steps."""
    question = " ".join(prompt.split())
    snippet = question[:100].rstrip() + ("..." if len(question) > 100 else "")
    number = _NUMBER.search(prompt)
    figure = (
        f"The prompt mentions {number.group()}; I take it as my starting point and adjust "
        "from there."
        if number
        else "No figure is given, so I reason from typical cases."
    )
    return "\n".join(
        [
            f"The question: {snippet}",
            figure,
            "I weigh what matters most here.",
            "So I give my answer in the format asked.",
        ]
    )


def signature(text: str) -> str:
    """What stands for Anthropic's encrypted signature of a thinking block."""
    digest = hashlib.sha512(text.encode()).digest()
    return base64.b64encode(b"EmuSig" + digest + hashlib.sha256(digest).digest()).decode()


def dress(
    body: dict[str, Any],
    p: Plan,
    config: EmulatorConfig,
    protocol: str,
    request: dict[str, Any],
    call: Call,
    completion_tokens: int,
) -> int:
    """Write the reasoning into the 200 `body` (that already holds the answer, of
    `completion_tokens`, Gemini's thoughts included); the completion tokens used, reasoning
    included."""
    text = trace_of(config, protocol, request, call.user_prompt) if p.traced else ""
    shown = max(1, round(tokens(text) * config.token_ratio)) if text else 0
    max_tokens = call.max_tokens
    if p.style == "openai":
        used, reasoning = p.tokens + completion_tokens, p.tokens
        choice = body["choices"][0]
        if p.limit is not None and used > p.limit:
            used = reasoning = p.limit  # reasoning took the whole allowance: no answer
            if choice["message"]["content"] is not None:
                choice["message"]["content"] = ""
                choice["finish_reason"] = "length"
        _openai_usage(body, used, reasoning)
        return used
    if p.style in ("reasoning_content", "openrouter"):
        message = body["choices"][0]["message"]
        if p.visible and p.style == "reasoning_content":
            message["reasoning_content"] = text
        elif p.visible:
            message["reasoning"] = text
            message["reasoning_details"] = [
                {"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}
            ]
        _openai_usage(body, shown + completion_tokens, shown)
        return shown + completion_tokens
    if p.style == "anthropic":
        if body["stop_reason"] == "refusal":
            return completion_tokens
        block = {"type": "thinking", "thinking": text, "signature": signature(text)}
        used = shown + completion_tokens
        if used > max_tokens:  # thinking ran out the allowance before the answer
            body["content"], body["stop_reason"], used = [block], "max_tokens", max_tokens
        else:
            body["content"].insert(0, block)
        body["usage"]["output_tokens"] = used
        # newer answers count the thinking apart too (it stays inside output_tokens)
        body["usage"]["output_tokens_details"] = {"thinking_tokens": min(shown, used)}
        return used
    # gemini: the thoughts are counted already (Emulator.answer); shown as a part if asked
    parts = ((body["candidates"][0].get("content") or {}).get("parts")) or []
    if text and parts:
        parts.insert(0, {"text": text, "thought": True})
    return completion_tokens


def _openai_usage(body: dict[str, Any], completion: int, reasoning: int) -> None:
    usage = body["usage"]
    usage["completion_tokens"] = completion
    usage["total_tokens"] = usage["prompt_tokens"] + completion
    usage["completion_tokens_details"] = {
        "reasoning_tokens": reasoning,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    }
    usage["prompt_tokens_details"] = {"cached_tokens": 0, "audio_tokens": 0}

"""Which providers there are and what each takes: the ones that can score (prompt
log-probabilities) or have a batch API, the temperatures each accepts, and the checks of one
model's settings that depend on its provider (ModelConfig.problems)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from orchestrator.spec import reasoning
from orchestrator.spec.secrets import (
    HOW_TO_PASS_A_KEY,
    SECRET_NAME,
    credential_in_url,
    looks_secret,
    redact,
)
from orchestrator.spec.server import endpoint_problems

if TYPE_CHECKING:
    from orchestrator.spec.campaign import ModelConfig

PROVIDERS = ("openai", "anthropic", "gemini", "local", "simulated")
SCORING_PROVIDERS = ("openai", "local", "simulated")  # those that can return prompt log-probs
BATCH_PROVIDERS = ("openai", "anthropic", "gemini")  # those with a batch API (batch = true)
# The temperatures each API accepts (local: llama.cpp takes any, but above 2 is noise).
TEMPERATURE_MAX = {"openai": 2.0, "anthropic": 1.0, "gemini": 2.0, "local": 2.0, "simulated": 2.0}
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")  # an HTTP token (RFC 9110)
# Request fields the tool writes itself, per protocol: extra_body may not replace them.
OWN_FIELDS = {
    "openai": (
        "model", "messages", "stream", "n", "max_tokens", "max_completion_tokens",
        "temperature", "top_p", "seed", "reasoning_effort", "response_format",
    ),
    "anthropic": (
        "model", "messages", "system", "stream", "max_tokens", "temperature", "top_p",
        "thinking", "output_config",
    ),
    "gemini": ("contents", "systemInstruction"),
}  # fmt: skip
# Fields the tool writes inside an object of its own (extra_body merges into it key by key):
# each is refused, the object's other fields may be sent (Gemini's stopSequences,
# candidateCount, ...). Gemini's generationConfig holds what the record and the cost estimate
# assume: the temperature, the token limit, the thinking budget.
OWN_NESTED = {
    "gemini": {
        "generationConfig": (
            "maxOutputTokens", "temperature", "topP", "seed", "responseMimeType",
            "responseSchema", "thinkingConfig",
        ),
    },
}  # fmt: skip
# The model's setting that writes a nested field: where the user sets it instead.
_SETTING = {
    "maxOutputTokens": "max_tokens",
    "temperature": "temperature",
    "topP": "top_p",
    "seed": "seed",
    "responseMimeType": "structured_output",
    "responseSchema": "structured_output",
    "thinkingConfig": "thinking_budget",
}
# Claude models with JSON outputs (output_config.format), as Anthropic's docs list them.
ANTHROPIC_JSON_OUTPUTS = re.compile(
    r"^claude-(?:(?:opus|sonnet|haiku)-4-[5-9]|(?:opus|sonnet|haiku)-[5-9])"
)


def _secret_in(value: object, path: str = "extra_body") -> str | None:
    """Where in a table a key-like name or value stands (never the value itself)."""
    if isinstance(value, dict):
        for name, inner in value.items():
            where = f"{path}.{redact(str(name))}"
            if SECRET_NAME.search(str(name)) or looks_secret(name):
                return where
            if (found := _secret_in(inner, where)) is not None:
                return found
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            if (found := _secret_in(inner, f"{path}[{i}]")) is not None:
                return found
    elif looks_secret(value):
        return path
    return None


# Headers the tool sets itself: a key or the body's type sent twice would be ambiguous.
OWN_HEADERS = ("content-type", "content-length", "host")


def _camel(name: str) -> str:
    """A field's JSON name: Gemini's API reads max_output_tokens as maxOutputTokens (a proto
    field is read by either name)."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


def _overwritten(provider: str, extra: dict) -> list[str]:
    """The fields of extra_body, as written there, that would replace one the tool writes: an
    own field, or a value that is no table in place of an object that holds own fields."""
    spell = _camel if provider == "gemini" else str
    top = set(OWN_FIELDS.get(provider, ()))
    nested = OWN_NESTED.get(provider, {})
    out = []
    for name, value in extra.items():
        field = spell(str(name))
        if field in top:
            out.append(str(name))
        elif field in nested:
            if not isinstance(value, dict):  # replaces the whole object, own fields and all
                out.append(str(name))
                continue
            out += [f"{name}.{inner}" for inner in value if spell(str(inner)) in nested[field]]
    return sorted(out)


def _request_problems(model: ModelConfig) -> list[tuple[str, str, str]]:
    """extra_body, headers_env and api_key_header: what may be sent beside the tool's own."""
    out = []
    own = _overwritten(model.provider or "", model.extra_body or {})
    if own:
        name = own[0]
        setting = _SETTING.get(_camel(name.rpartition(".")[2])) if "." in name else None
        out.append(
            (
                f"extra_body.{name}",
                f"extra_body may not set '{name}': the tool writes it from the plan",
                f"remove '{name}' from extra_body"
                + (f"; set the model's `{setting}` instead" if setting else ""),
            )
        )
    if (where := _secret_in(model.extra_body)) is not None:
        out.append(
            (
                where,
                f"{where} looks like a credential; extra_body is recorded in the manifest "
                "and is part of task ids",
                "send secrets as headers from the environment: headers_env = "
                '{"Header-Name" = "ENV_VAR"}, or the key through api_key_env',
            )
        )
    if model.extra_body and (model.provider not in OWN_FIELDS):
        out.append(
            (
                "extra_body",
                f"provider '{model.provider}' sends no request body of this kind",
                "remove extra_body",
            )
        )
    for header, env in (model.headers_env or {}).items():
        if not HEADER_NAME.fullmatch(header) or header.lower() in OWN_HEADERS:
            out.append(
                (
                    f"headers_env.{redact(header)}",
                    f"'{redact(header)}' is not a header this tool can send",
                    "name an HTTP header (letters, digits, -), not Content-Type or Host",
                )
            )
        if not ENV_NAME.fullmatch(env):
            out.append(
                (
                    f"headers_env.{redact(header)}",
                    "a header's value is the name of an environment variable, not the value",
                    'write {"Header-Name" = "ENV_VAR"} and export ENV_VAR=<value>',
                )
            )
    if model.api_key_header is not None and not HEADER_NAME.fullmatch(model.api_key_header):
        out.append(
            (
                "api_key_header",
                "api_key_header must be an HTTP header name",
                'e.g. api_key_header = "api-key" (Azure OpenAI)',
            )
        )
    elif model.api_key_header is not None and model.api_key_header.lower() in OWN_HEADERS:
        out.append(
            (
                "api_key_header",
                f"api_key_header '{model.api_key_header}' is a header the tool sets itself "
                "(Content-Type, Content-Length, Host): the key cannot go there",
                "name the header your server reads the key from, e.g. "
                'api_key_header = "api-key" (Azure OpenAI)',
            )
        )
    return out


def _key_problems(model: ModelConfig) -> list[tuple[str, str, str]]:
    """A key where only a URL or a variable's name belongs; never printed back."""
    out = []
    if model.base_url and (where := credential_in_url(model.base_url)):
        out.append(
            (
                "base_url",
                f"base_url holds a credential {where}; it would be written to the run's manifest",
                f"remove it from base_url; {HOW_TO_PASS_A_KEY}",
            )
        )
    if model.api_key_env is not None and (
        not ENV_NAME.fullmatch(model.api_key_env)
        or (looks_secret(model.api_key_env) and not model.api_key_env.isupper())
    ):
        out.append(
            (
                "api_key_env",
                "api_key_env must be the name of an environment variable "
                "(letters, digits, _), not the key itself",
                HOW_TO_PASS_A_KEY,
            )
        )
    return out


def model_problems(model: ModelConfig) -> list[tuple[str, str, str]]:
    """(field, what is wrong, fix) for settings that depend on the provider."""
    out = []
    if model.provider is None:
        out.append(
            (
                "provider",
                "the model names no provider",
                f"add provider = one of {', '.join(PROVIDERS)}, or a preset",
            )
        )
    out += _key_problems(model)
    out += reasoning.problems(model)
    out += _request_problems(model)
    if (
        model.provider == "anthropic"
        and model.structured_output
        and not ANTHROPIC_JSON_OUTPUTS.match(model.name or "")
    ):
        out.append(
            (
                "structured_output",
                f"'{model.name}' is not among the Claude models with JSON outputs (Opus and "
                "Sonnet 4.5 and later, Haiku 4.5 and later)",
                "set structured_output = false for this model, or use a newer Claude",
            )
        )
    if model.base_url and not model.base_url.startswith(("http://", "https://")):
        out.append(
            (
                "base_url",
                f"base_url '{redact(model.base_url)}' has no http:// or https:// scheme",
                f'write base_url = "http://{redact(model.base_url)}" (or https://)',
            )
        )
    top = TEMPERATURE_MAX.get(model.provider or "")
    if model.temperature is not None and top is not None and not 0 <= model.temperature <= top:
        out.append(
            (
                "temperature",
                f"temperature {model.temperature} is outside the range "
                f"provider '{model.provider}' accepts (0 to {top:g})",
                f"set temperature between 0 and {top:g}",
            )
        )
    out += endpoint_problems(model.provider, model.base_url, model.base_urls, model.batch)
    if model.server is not None and model.provider == "local":
        out += model.server.problems()
    if model.provider == "openai" and not (model.base_url or model.base_urls):
        out.append(
            (
                "base_url",
                "provider 'openai' needs base_url",
                'add base_url = "https://api.openai.com/v1" (or your server\'s URL)',
            )
        )
    if model.provider != "local" and not model.name:
        out.append(
            (
                "name",
                f"provider '{model.provider}' needs a model name",
                "add the required field 'name'",
            )
        )
    if model.answers == "score" and model.provider not in SCORING_PROVIDERS:
        out.append(
            (
                "answers",
                f"provider '{model.provider}' returns no log-probabilities of "
                'the prompt, which answers = "score" reads',
                'use answers = "score" '
                "with provider local, simulated or openai (an OpenAI-compatible "
                "/v1/completions endpoint with echo and logprobs: vLLM, llama-cpp-python)",
            )
        )
    if model.batch and not model.has_batch_api:
        service = (
            f"preset '{model.preset}'"
            if model.provider in BATCH_PROVIDERS
            else f"provider '{model.provider}'"
        )
        out.append(
            (
                "batch",
                f"{service} has no batch API this tool speaks",
                f"set batch = false; batch mode is for providers {', '.join(BATCH_PROVIDERS)} "
                "(without a preset, or with the preset of the same name)",
            )
        )
    if model.batch and model.answers == "score":
        out.append(
            (
                "batch",
                'answers = "score" reads prompt log-probabilities, which the '
                "batch APIs do not return",
                "set batch = false for this model",
            )
        )
    if model.provider != "local" and model.server is not None:
        out.append(
            (
                "server",
                "'server' settings apply to provider 'local' only",
                "remove the [models.server] table",
            )
        )
    return out

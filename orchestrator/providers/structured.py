"""JSON schemas for response contracts, in the request forms providers accept."""

from __future__ import annotations

import functools
from typing import Any

from orchestrator.spec.models import ResponseContract

REASON_MAX_CHARS = 160  # "one short sentence", as the judge-history output contract asks


@functools.lru_cache(maxsize=4096)
def _schema(contract: ResponseContract) -> dict[str, Any]:
    if contract.kind == "judgment":
        return {
            "type": "object",
            "properties": {
                "score": {
                    "type": "integer",
                    "enum": list(range(contract.minimum, contract.maximum + 1)),
                },
                "verdict": {"type": "string", "enum": list(contract.options)},
                # Bounded, so a constrained small model cannot talk past max_tokens mid-string.
                "reason": {"type": "string", "maxLength": REASON_MAX_CHARS},
            },
            "required": ["score", "verdict", "reason"],
            "additionalProperties": False,
        }
    if contract.kind == "choice":
        field = {"type": "string", "enum": list(contract.options)}
    elif contract.kind == "rating":
        # An enum, not minimum/maximum: every grammar-constrained decoder supports enums.
        field = {"type": "integer", "enum": list(range(contract.minimum, contract.maximum + 1))}
    else:
        field = {"type": "number"}
    return {
        "type": "object",
        "properties": {contract.field: field},
        "required": [contract.field],
        "additionalProperties": False,
    }


def json_schema(contract: ResponseContract) -> dict[str, Any]:
    """The JSON schema an answer under this contract must match."""
    return _schema(contract)


def response_format(contract: ResponseContract, form: str) -> dict[str, Any]:
    """`json_schema`: OpenAI's form (also vLLM, Groq...); `json_object_schema`: llama.cpp's."""
    if form == "json_object_schema":
        return {"type": "json_object", "schema": json_schema(contract)}
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "strict": True, "schema": json_schema(contract)},
    }

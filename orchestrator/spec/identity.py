"""A model identity as a manifest records it (a dict): its key and whether it samples. Apart from
campaign.py so that the readers of a run (status, analyze, view) need not import the config's
models (pydantic) to read one."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson


def identity_key(identity: dict[str, Any]) -> str:
    """ModelConfig.key of an identity, also as read back from a manifest."""
    blob = orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(blob, digest_size=6).hexdigest()


def is_deterministic(identity: dict[str, Any]) -> bool:
    """A model set to temperature 0 exactly: greedy decoding, so its repeated answers to one
    prompt are one draw, not independent samples. That holds for llama.cpp (the per-sample seed
    changes nothing at 0) and near enough for hosted APIs (their residual variation at 0 is
    batching noise, not the model's answer distribution). The simulated respondent draws from
    its planted distributions at any temperature but is taken at its word like the models it
    stands in for. An unset temperature is the provider's default, which samples. A model that
    answers by scoring is deterministic at any temperature: log-probabilities are not drawn."""
    return identity.get("temperature") == 0 or identity.get("answers") == "score"

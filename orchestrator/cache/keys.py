"""The cache key of a call: a digest of everything that decides what the model is asked.

Not the task id: that names the task's place in a campaign (job, strategy and variant ids). The
key is the call itself, so two campaigns asking the same model the same messages share it:
- the model identity (ModelConfig.identity: provider, name, version, base_url, decoding
  settings, structured output) and the structured output form, which changes the schema sent;
- the rendered messages and the answer contract (the schema a structured call sends);
- the sample number, and the seed sent with it when the model has one (it derives from the
  task id, so a seeded model's samples are keyed as the provider sends them);
- for a scoring call, the scored text and continuation only: no seed or sample is sent.
"""

from __future__ import annotations

import hashlib

import orjson

from orchestrator.plan import Cell
from orchestrator.spec.campaign import ModelConfig

DIGEST = 16


def model_part(model: ModelConfig) -> bytes:
    """The model's share of every key, encoded once per provider."""
    return orjson.dumps(
        {"model": model.identity(), "form": model.structured_output_form},
        option=orjson.OPT_SORT_KEYS,
    )


def cell_digest(model: bytes, cell: Cell) -> bytes:
    """What every sample of a cell shares: the model, the messages, the contract."""
    blob = orjson.dumps(
        {"messages": cell.messages, "contract": cell.contract.model_dump()},
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.blake2b(model + b"\0" + blob, digest_size=DIGEST).digest()


def completion_key(cell_part: bytes, sample: int, seed: int | None) -> bytes:
    tail = b"" if seed is None else seed.to_bytes(8, "big", signed=True)
    return hashlib.blake2b(
        b"c" + cell_part + sample.to_bytes(4, "big") + tail, digest_size=DIGEST
    ).digest()


def score_key(model: bytes, text: str, continuation: str) -> bytes:
    return hashlib.blake2b(
        b"s" + model + b"\0" + orjson.dumps([text, continuation]), digest_size=DIGEST
    ).digest()

"""What the emulated model answers: valid under the request's schema when one is sent, else
guessed from the prompt's own wording of its answer format."""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

import orjson

from orchestrator.wording import rating_scale

_QUOTED = re.compile(r'\{\s*"choice"\s*:\s*"([^"]+)"\s*\}')
_OPTIONS = re.compile(r"Choose one option:\s*(.+?)\.\s*Return", re.S)


def tokens(text: str) -> int:
    """The emulator's tokenizer: about four characters a token."""
    return max(1, (len(text) + 3) // 4)


def from_schema(schema: dict[str, Any], rng: random.Random) -> str:
    props = schema.get("properties", {})
    out = {}
    for name, spec in props.items():
        kind = str(spec.get("type", "")).lower()
        if spec.get("enum"):
            out[name] = rng.choice(spec["enum"])
        elif kind == "integer":
            out[name] = rng.randint(spec.get("minimum", 1), spec.get("maximum", 7))
        elif kind == "number":
            out[name] = round(rng.uniform(1, 1000), 2)
        else:
            out[name] = "ok"
    return orjson.dumps(out).decode()


def from_prompt(prompt: str, rng: random.Random) -> str:
    if "json" not in prompt.lower():  # asked in words, answered in words (an extractor's work)
        return f"I would say about {rng.randint(2, 40)} weeks, give or take."
    if '"choice"' in prompt:
        options = [o for o in _QUOTED.findall(prompt) if o != "..."]
        if not options and (m := _OPTIONS.search(prompt)):
            options = [o.strip() for o in m.group(1).split(";") if o.strip()]
        return orjson.dumps({"choice": rng.choice(options or ["yes"])}).decode()
    if "integer" in prompt:  # on the scale the prompt states, as a model reading it would
        lo, hi = rating_scale(prompt) or (1, 7)
        return orjson.dumps({"value": rng.randint(lo, hi)}).decode()
    return orjson.dumps({"value": round(rng.uniform(1, 1000), 2)}).decode()


def answer(prompt: str, schema: dict[str, Any] | None, rng: random.Random) -> str:
    return from_schema(schema, rng) if schema else from_prompt(prompt, rng)


_TOKEN = re.compile(r"\s*\S+|\s+")


def logprob(context: list[str], token: str, bonus: dict[str, float]) -> float:
    """A deterministic log-probability of `token` after the last three tokens of `context`,
    between -8.25 and -4.25, plus the token word's bonus."""
    seen = "|".join(context[-3:]) + "#" + token
    h = int.from_bytes(hashlib.blake2b(seen.encode(), digest_size=4).digest(), "big")
    return -4.25 - (h % 1000) / 250 + bonus.get(token.strip(), 0.0)


def echo_logprobs(prompt: str, bonus: dict[str, float]) -> dict[str, Any]:
    """The prompt's tokens (whitespace leads a word), their offsets and log-probabilities, as
    OpenAI's legacy completions give them (the first token has none), and one generated token."""
    tokens_, offsets, values = [], [], []
    for m in _TOKEN.finditer(prompt):
        values.append(logprob(tokens_, m.group(), bonus) if tokens_ else None)
        tokens_.append(m.group())
        offsets.append(m.start())
    tokens_.append(" ok")
    offsets.append(len(prompt))
    values.append(-1.0)
    return {
        "tokens": tokens_,
        "text_offset": offsets,
        "token_logprobs": values,
        "top_logprobs": [None if v is None else {t: v} for t, v in zip(tokens_, values)],
    }

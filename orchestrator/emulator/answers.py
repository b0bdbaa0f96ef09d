"""What the emulated model answers: valid under the request's schema when one is sent, else
guessed from the prompt's own wording of its answer format."""
from __future__ import annotations

import random
import re
from typing import Any

import orjson

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
    if '"choice"' in prompt:
        options = [o for o in _QUOTED.findall(prompt) if o != "..."]
        if not options and (m := _OPTIONS.search(prompt)):
            options = [o.strip() for o in m.group(1).split(";") if o.strip()]
        return orjson.dumps({"choice": rng.choice(options or ["yes"])}).decode()
    if "integer" in prompt:
        return orjson.dumps({"value": rng.randint(1, 7)}).decode()
    return orjson.dumps({"value": round(rng.uniform(1, 1000), 2)}).decode()


def answer(prompt: str, schema: dict[str, Any] | None, rng: random.Random) -> str:
    return from_schema(schema, rng) if schema else from_prompt(prompt, rng)

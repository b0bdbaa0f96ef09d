"""Response contracts: find the JSON answer in raw model text, validate it, normalise it."""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import orjson

from orchestrator.spec.models import ResponseContract

# strict=False accepts raw control characters (a newline) inside strings, which small models
# emit even under a grammar; nothing else about the JSON is relaxed.
_DECODER = json.JSONDecoder(strict=False)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-")
_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$")


@dataclass(frozen=True, slots=True)
class Parsed:
    ok: bool
    value: float | int | None = None
    choice: str | None = None
    error: str | None = None
    reason: str | None = None  # judgments only


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object found in the text, in order: whole text, code fences, then any `{...}`."""
    try:
        whole = orjson.loads(text)
    except orjson.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    found: list[dict[str, Any]] = []
    for candidate in _FENCE.findall(text):
        try:
            obj = _DECODER.decode(candidate.strip())
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    if found:
        return found
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        pos = text.find("{", end)
    return found


def normalise_option(text: str) -> str:
    """Fold the differences that do not change which option was meant: case, spacing, dashes."""
    text = unicodedata.normalize("NFKC", text).translate(_DASHES).casefold()
    text = re.sub(r"\s+", " ", text).strip().strip("\"'`").rstrip(".").strip()
    return text


@functools.lru_cache(maxsize=4096)
def _option_index(options: tuple[str, ...]) -> dict[str, str | None]:
    """Normalised form -> exact option; None where two options normalise alike (ambiguous)."""
    index: dict[str, str | None] = {}
    for option in options:
        key = normalise_option(option)
        index[key] = None if key in index else option
    return index


def _number(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        try:
            number = float(raw)  # an integer too wide for a float is no usable answer
        except OverflowError:
            return None
        return number if math.isfinite(number) else None
    if isinstance(raw, str):
        s = re.sub(r"[€$£\s]|(EUR|USD|GBP)$", "", raw.strip())
        if _NUMBER.match(s):
            return float(s.replace(",", ""))
    return None


def _check_judgment(obj: dict[str, Any], contract: ResponseContract) -> Parsed:
    """score (integer in range), verdict (one of the options) and reason (text), all required.
    A verdict that disagrees with its score is kept as given: analysis counts it."""
    for key in ("score", "verdict", "reason"):
        if key not in obj:
            return Parsed(False, error=f"missing field '{key}'")
    score = check(
        {"score": obj["score"]},
        ResponseContract(
            kind="rating", field="score", minimum=contract.minimum, maximum=contract.maximum
        ),
    )
    if not score.ok:
        return score
    verdict = check(
        {"verdict": obj["verdict"]},
        ResponseContract(kind="choice", field="verdict", options=contract.options),
    )
    if not verdict.ok:
        return verdict
    if not isinstance(obj["reason"], str):
        return Parsed(False, error="'reason' is not text")
    return Parsed(True, value=score.value, choice=verdict.choice, reason=obj["reason"])


def check(obj: dict[str, Any], contract: ResponseContract) -> Parsed:
    if contract.kind == "judgment":
        return _check_judgment(obj, contract)
    if contract.field not in obj:
        return Parsed(False, error=f"missing field '{contract.field}'")
    raw = obj[contract.field]
    if contract.kind == "choice":
        if not isinstance(raw, str):
            return Parsed(False, error=f"'{contract.field}' is not a string")
        if raw in contract.options:
            return Parsed(True, choice=raw)
        match = _option_index(contract.options).get(normalise_option(raw))
        if match is None:
            return Parsed(False, error=f"{raw!r} is not one of the options")
        return Parsed(True, choice=match)
    number = _number(raw)
    if number is None:
        return Parsed(False, error=f"'{contract.field}' is not a number: {raw!r}")
    if contract.kind == "rating":
        if number != int(number):
            return Parsed(False, error=f"rating {number} is not an integer")
        if not contract.minimum <= number <= contract.maximum:
            return Parsed(
                False, error=f"rating {int(number)} outside {contract.minimum}-{contract.maximum}"
            )
        return Parsed(True, value=int(number))
    return Parsed(True, value=number)


def parse_answer(text: str, contract: ResponseContract) -> Parsed:
    """The answer the text gives under the contract; the last valid JSON object wins, so an
    answer after free reasoning is found."""
    objects = json_objects(text)
    if not objects:
        return Parsed(False, error="no JSON object in the answer")
    first_error = None
    for obj in reversed(objects):
        parsed = check(obj, contract)
        if parsed.ok:
            return parsed
        first_error = first_error or parsed.error
    return Parsed(False, error=first_error)

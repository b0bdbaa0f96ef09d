"""What servers say in their replies besides the answer: rate-limit headers, retry hints and
token usage, each read in every protocol's spelling, never raising on what a server sends."""

from __future__ import annotations

import email.utils
import math
import re
import time
from datetime import datetime

from multidict import CIMultiDictProxy

from orchestrator.providers.errors import RateInfo

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _number(value: object) -> float | None:
    """A finite, non-negative number, or None. float() alone takes "inf", "nan", "-5" and
    "1e400" (which is inf), none of which is a count or a wait."""
    if value is None:  # a header not sent, on every reply: no exception raised and caught
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if 0.0 <= number < math.inf else None


def _plain_number(text: str) -> bool:
    """ASCII digits, with at most one inner decimal point: what `_DURATION` reads as a number."""
    whole, dot, fraction = text.partition(".")
    return (
        whole.isascii()
        and whole.isdigit()
        and (not dot or (fraction.isascii() and fraction.isdigit()))
    )


def seconds_until(value: str | None) -> float | None:
    """A reset or retry hint as seconds from now: delta-seconds ("1.5"), a duration ("6m0s",
    "120ms"), an HTTP date, or an RFC 3339 time (0 once past). Anything else is None, never an
    exception: whatever a server puts in a header must not take a run down.

    Rate-limit headers come with every reply, so their usual forms are read first without an
    exception or a regex: OpenAI's durations in one unit ("20ms", "1.5s") and RFC 3339 times
    (Anthropic)."""
    if not isinstance(value, str) or not (value := value.strip()):
        return None
    if len(value) >= 2 and value[-1] == "s":
        in_ms = value[-2] == "m"
        number = value[:-2] if in_ms else value[:-1]
        if _plain_number(number):
            return _number(float(number) * _UNIT_S["ms" if in_ms else "s"])
    rfc3339 = len(value) >= 19 and value[4] == "-" and value[10] == "T"
    if not rfc3339:
        if (seconds := _number(value)) is not None:
            return seconds
        if (parts := _DURATION.findall(value)) and "".join(n + u for n, u in parts) == value:
            return _number(sum(float(n) * _UNIT_S[u] for n, u in parts))
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError, OSError):
        try:
            when = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, OverflowError, OSError, IndexError):
            return None
    return max(0.0, when - time.time())


def _int(value: str | None) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


_RATE_NAMES: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}


def _rate_names(prefix: str, reset_suffix: str) -> tuple[tuple[str, str], ...]:
    """The six header names, each in both spellings (OpenAI's first), built once per protocol:
    limit, remaining and reset of requests, then of tokens."""
    names = _RATE_NAMES.get((prefix, reset_suffix))
    if names is None:
        names = _RATE_NAMES[prefix, reset_suffix] = tuple(
            (f"{prefix}{what}-{kind}", f"{prefix}{kind}-{what}")
            for kind in ("requests", "tokens")
            for what in ("limit", "remaining", reset_suffix)
        )
    return names


def rate_info(
    headers: CIMultiDictProxy, prefix: str, reset_suffix: str = "reset"
) -> RateInfo | None:
    """Limit headers named `<prefix>{limit,remaining,reset}-{requests,tokens}` (OpenAI) or
    `<prefix>{requests,tokens}-{limit,remaining,reset}` (Anthropic).

    Read on every reply, so it looks up exact names only, and the rest only when a remaining
    count says the server reports its limits at all."""
    (limit_r, left_r, reset_r, limit_t, left_t, reset_t) = _rate_names(prefix, reset_suffix)
    get = headers.get
    remaining_requests = _int(get(left_r[0]) or get(left_r[1]))
    remaining_tokens = _int(get(left_t[0]) or get(left_t[1]))
    if remaining_requests is None and remaining_tokens is None:  # the usual case: none sent
        return None
    return RateInfo(
        _int(get(limit_r[0]) or get(limit_r[1])),
        remaining_requests,
        seconds_until(get(reset_r[0]) or get(reset_r[1])),
        _int(get(limit_t[0]) or get(limit_t[1])),
        remaining_tokens,
        seconds_until(get(reset_t[0]) or get(reset_t[1])),
    )


def usage(
    report: dict | None, prompt_key: str, completion_key: str, thinking_key: str | None = None
) -> dict[str, int | None] | None:
    """A server's usage report in the product's own names, whatever the protocol calls them.
    Tokens billed as output besides the answer's own (reasoning) are completion tokens: cost,
    budget and token pacing all read them there. Where the server counts them apart, they are
    also `reasoning_tokens`: OpenAI's completion_tokens_details (inside completion_tokens
    already), Gemini's thoughtsTokenCount (outside candidatesTokenCount, so added)."""
    if not report or not isinstance(report, dict):
        return None
    completion = _int(report.get(completion_key))
    out = {"prompt_tokens": _int(report.get(prompt_key)), "completion_tokens": completion}
    if thinking_key is not None:
        if (thought := _int(report.get(thinking_key))) is not None:
            out["completion_tokens"] = (completion or 0) + thought
            out["reasoning_tokens"] = thought
    elif isinstance(details := report.get("completion_tokens_details"), dict):
        if (thought := _int(details.get("reasoning_tokens"))) is not None:
            out["reasoning_tokens"] = thought
    return out

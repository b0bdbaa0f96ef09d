"""A cache row read back, checked: the cache file may be shared, so each field must be what an
answer from the wire may be (the same bounds: an answer's text and trace within
MAX_ANSWER_BYTES, short names without control characters, usage as a few non-negative token
counts, the paying run's id a plain campaign/run name). A row that is not is Refused, naming
the field, never its value."""

from __future__ import annotations

import math
import re

import orjson

from orchestrator.providers.base import Completion
from orchestrator.providers.http import MAX_ANSWER_BYTES

# What a row's fields may be: an answer's text and trace within the bound of an answer from the
# wire; short names without control characters; usage as a few non-negative token counts.
MAX_NAME_CHARS = 256  # served_model, system_fingerprint, finish_reason
MAX_USAGE_CHARS = 4096  # usage's JSON: a handful of counts
MAX_USAGE_FIELDS = 16
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# The run that paid: campaign/run-id, each a folder name as CampaignConfig's patterns allow
# (a run id alone in rows from before campaigns were named).
_RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,255}(?:/[A-Za-z0-9._-]{1,255})?")
_MAX_COUNT = 2**63  # a token count SQLite and Polars hold as an integer


class _NotUtf8:
    """A TEXT value that is not UTF-8: refused as a field, not an error that turns the cache
    off (nor one whose message quotes the value)."""


_NOT_UTF8 = _NotUtf8()


def text_of(raw: bytes) -> str | _NotUtf8:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return _NOT_UTF8


class Refused(ValueError):
    """A row whose `field` is not what this tool writes."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


def _utf8_size(text: str, limit: int) -> int:
    """The text's size in UTF-8, counted exactly only where it could pass `limit`."""
    if len(text) > limit or text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _name(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS or _CONTROL.search(value):
        raise Refused(field)
    return value


def _usage(value: object) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_USAGE_CHARS:
        raise Refused("usage")
    try:
        usage = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise Refused("usage") from None
    if usage is None:
        return None
    if not isinstance(usage, dict) or len(usage) > MAX_USAGE_FIELDS:
        raise Refused("usage")
    for name, count in usage.items():
        if len(name) > 64 or _CONTROL.search(name):
            raise Refused("usage")
        if count is not None and (
            type(count) is not int or not 0 <= count < _MAX_COUNT  # a bool is no count
        ):
            raise Refused("usage")
    return usage


def answer_of(found: tuple, reasoning: object) -> Completion:
    """A row's answer, each field checked against what an answer from the wire may be; or
    Refused, naming the first field that is not."""
    text, usage, served, fingerprint, finish, logprob, run_id = found
    if not isinstance(text, str):
        raise Refused("text")
    size = _utf8_size(text, MAX_ANSWER_BYTES)
    if size > MAX_ANSWER_BYTES:
        raise Refused("text")
    if reasoning is not None:  # answer and trace came in one body, of at most the bound
        room = MAX_ANSWER_BYTES - size
        if not isinstance(reasoning, str) or _utf8_size(reasoning, room) > room:
            raise Refused("reasoning")
    if logprob is not None and (type(logprob) is not float or math.isnan(logprob)):
        raise Refused("logprob")
    if (
        not isinstance(run_id, str)
        or not _RUN_ID.fullmatch(run_id)
        or any(not part.strip(".") for part in run_id.split("/"))  # ".", "..": no folder
    ):
        raise Refused("run_id")
    return Completion(
        text,
        usage=_usage(usage),
        served_model=_name(served, "served_model"),
        system_fingerprint=_name(fingerprint, "system_fingerprint"),
        finish_reason=_name(finish, "finish_reason"),
        logprob=logprob,
        cached_from=run_id,
        reasoning=reasoning,
    )

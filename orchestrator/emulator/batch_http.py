"""What the emulator's batch routes share on the wire: answers and error answers (Problem, in
the protocol's own shape once the route wraps it), request bodies read under a size cap, the
members of a large JSON array decoded one at a time, and the ids and timestamps the batch
objects carry."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

MB = 2**20


def rfc3339(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def hex_id(n: int = 24) -> str:
    return uuid.uuid4().hex[:n]


_WS = re.compile(r"[ \t\n\r]*")


def array_member(text: str, key: str) -> Iterator[Any]:
    """The elements of the array held by member `key` of the JSON object `text`, decoded one at a
    time (a 256 MB Anthropic batch would be gigabytes as one Python object). Other members are
    skipped; a malformed text raises ValueError."""
    decode, skip = json.JSONDecoder().raw_decode, lambda i: _WS.match(text, i).end()
    i = skip(0)
    if text[i : i + 1] != "{":
        raise ValueError("the body is not a JSON object")
    i = skip(i + 1)
    while text[i : i + 1] != "}":
        name, i = decode(text, i)
        i = skip(i)
        if text[i : i + 1] != ":":
            raise ValueError(f"':' expected at {i}")
        i = skip(i + 1)
        if name == key and text[i : i + 1] == "[":
            i = skip(i + 1)
            while text[i : i + 1] != "]":
                item, i = decode(text, i)
                yield item
                i = skip(i)
                if text[i : i + 1] == ",":
                    i = skip(i + 1)
                elif text[i : i + 1] != "]":
                    raise ValueError(f"',' or ']' expected at {i}")
            i = skip(i + 1)
        else:
            _, i = decode(text, i)
            i = skip(i)
        if text[i : i + 1] == ",":
            i = skip(i + 1)
        elif text[i : i + 1] != "}":
            raise ValueError(f"',' or '}}' expected at {i}")


class Problem(Exception):
    """An error answer in the protocol's own shape."""

    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def answer(body: Any, status: int = 200) -> web.Response:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return web.Response(status=status, body=data, content_type="application/json")


async def read_capped(request: web.Request, cap: int) -> bytearray:
    """The request body, read as it streams in (client_max_size does not apply), or a 413."""
    buf, size = bytearray(), 0
    async for chunk in request.content.iter_chunked(1 << 20):
        size += len(chunk)
        if size > cap:
            raise Problem(
                413,
                f"Request exceeds the maximum allowed size of {cap} bytes.",
                "request_too_large",
            )
        buf += chunk
    return buf

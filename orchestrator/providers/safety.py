"""What keeps a server's answer from hurting the run: keys sent to one origin only, answers
decompressed a bounded piece at a time, and keys masked in messages without mangling them."""

from __future__ import annotations

import re
import zlib
from collections.abc import AsyncIterator
from urllib.parse import urljoin, urlsplit

import aiohttp

from orchestrator.providers.errors import Fatal

_PIECE = 1 << 20  # the most one decompression step makes
MIN_SECRET = 8  # shorter values are not secrets: local servers are given keys like x or EMPTY
LONG_SECRET = 20  # no word holds a run this long by chance: masked wherever it stands


def origin(url: str) -> str:
    """scheme://host:port of a URL, without its path, query or user part (for messages)."""
    parts = urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:  # a port that is no number
        return "(an unusable address)"
    return f"{parts.scheme}://{parts.hostname}:{port}" if parts.hostname else "(no host)"


def same_origin(url: str, base: str) -> bool:
    """Whether `url` (resolved against `base`, as a client would) is on base's origin."""
    return origin(urljoin(base + "/", url)) == origin(base)


def _inflater(encoding: str, first: bytes):
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(wbits=31)
    # HTTP's deflate is zlib-wrapped, but some servers send it raw: the header tells which
    wrapped = len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
    return zlib.decompressobj(wbits=15 if wrapped else -15)


async def decoded(resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive, decompressed (gzip, deflate) in pieces of at most
    _PIECE, so a reader that stops early never holds more than it asked for and one piece.
    aiohttp's own decompression inflates a whole network read at once (64 MB from 64 KB of a
    gzip bomb), so the session leaves it to this."""
    encoding = resp.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
        raise Fatal(
            f"the server sent its answer as Content-Encoding {encoding[:40]!r}, which was not "
            "asked for (only gzip and deflate are)\n  fix: check base_url points at the API"
        )
    inflate = None
    async for chunk in resp.content.iter_chunked(1 << 16):
        if not encoding or encoding == "identity":
            yield chunk
            continue
        inflate = inflate or _inflater(encoding, chunk)
        data = chunk
        while data:
            try:
                piece = inflate.decompress(data, _PIECE)
            except zlib.error as exc:
                raise aiohttp.ClientPayloadError(f"cannot decompress the answer: {exc}") from None
            if piece:
                yield piece
            data = inflate.unconsumed_tail


def _hex(value: int, width: int) -> str:
    """`value` in hex, as a pattern that takes either case of each letter digit."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{value:0{width}x}")


def _any_form(c: str) -> str:
    r"""Every form a server may write one character of a secret in: itself; JSON-escaped, as
    `\uXXXX` (a surrogate pair past the BMP) or `\/` `\"` `\\`; URL-encoded, as `%XX` for each
    byte of its UTF-8, or `+` for a space. Hex digits in either case."""
    units = c.encode("utf-16-be", "surrogatepass")
    forms = [
        re.escape(c),
        "".join(
            rf"\\u{_hex(int.from_bytes(units[i : i + 2], 'big'), 4)}"
            for i in range(0, len(units), 2)
        ),
        "".join(f"%{_hex(byte, 2)}" for byte in c.encode("utf-8", "surrogatepass")),
    ]
    if c in '/"\\':
        forms.append(re.escape("\\" + c))
    if c == " ":
        forms.append(r"\+")
    return f"(?:{'|'.join(forms)})"


def secret_pattern(values: list[str | None]) -> re.Pattern[str] | None:
    """What a provider masks in its messages and answers: each secret long enough to be one, in
    any mix of the forms a server may echo it in (_any_form: a 401 body that quotes the request's
    headers JSON-escaped, a URL-encoded one), longer secrets first; a shorter one as a whole
    token only (not inside a longer run of letters and digits), so that a key `x` never turns
    "exceeded" into "e***ceeded"; a long one wherever it stands."""
    secrets = sorted({v for v in values if v and len(v) >= MIN_SECRET}, key=len, reverse=True)
    if not secrets:
        return None
    forms = []
    for secret in secrets:
        form = "".join(_any_form(c) for c in secret)
        if len(secret) < LONG_SECRET:
            form = rf"(?<![A-Za-z0-9]){form}(?![A-Za-z0-9])"
        forms.append(form)
    return re.compile("|".join(forms))

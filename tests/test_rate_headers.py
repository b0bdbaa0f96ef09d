"""Reading rate-limit headers, which happens on every reply: the cheap reading must say exactly
what the plain one says, name by name, every value through `seconds_until` and `_int`."""

from __future__ import annotations

import types
from datetime import UTC, datetime
from email.utils import format_datetime
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from orchestrator.providers import replies as http
from orchestrator.providers.errors import RateInfo
from orchestrator.providers.replies import _int, rate_info, seconds_until

NOW = 1_800_000_000.0  # the wall clock, frozen: resets given as times of day depend on it
PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def plain_reading(headers, prefix: str, reset_suffix: str = "reset") -> RateInfo | None:
    def get(kind: str, what: str) -> str | None:
        return headers.get(f"{prefix}{what}-{kind}") or headers.get(f"{prefix}{kind}-{what}")

    info = RateInfo(
        _int(get("requests", "limit")),
        _int(get("requests", "remaining")),
        seconds_until(get("requests", reset_suffix)),
        _int(get("tokens", "limit")),
        _int(get("tokens", "remaining")),
        seconds_until(get("tokens", reset_suffix)),
    )
    return (
        info if info.remaining_requests is not None or info.remaining_tokens is not None else None
    )


def plain_seconds(value):
    """seconds_until's generic reading, without its fast forms: a number, a duration by regex,
    then a date."""
    import email.utils

    if not isinstance(value, str) or not (value := value.strip()):
        return None
    if (seconds := http._number(value)) is not None:
        return seconds
    if (parts := http._DURATION.findall(value)) and "".join(n + u for n, u in parts) == value:
        return http._number(sum(float(n) * http._UNIT_S[u] for n, u in parts))
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError, OSError):
        try:
            when = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, OverflowError, OSError, IndexError):
            return None
    return max(0.0, when - http.time.time())


def outcome(read, value: str):
    """What a reading returns, or the kind of error it raises."""
    try:
        return read(value)
    except Exception as exc:  # noqa: BLE001 - the same failure counts as the same answer
        return type(exc)


def frozen_clock():
    return mock.patch.object(http, "time", types.SimpleNamespace(time=lambda: NOW))


moments = st.floats(-1e5, 1e6).map(lambda s: datetime.fromtimestamp(NOW + s, UTC))
numbers = st.integers(0, 10**7).map(str) | st.decimals(0, 1e5, places=3).map(str)
values = st.one_of(
    numbers,
    st.builds(lambda n, u: n + u, numbers, st.sampled_from(["ms", "s", "m", "h"])),  # OpenAI
    st.lists(
        st.builds(lambda n, u: n + u, numbers, st.sampled_from(["ms", "s", "m", "h"])),
        min_size=2,
        max_size=3,
    ).map("".join),  # "6m0s"
    moments.map(lambda t: t.isoformat()),  # Anthropic
    moments.map(lambda t: t.isoformat().replace("+00:00", "Z")),
    moments.map(lambda t: format_datetime(t, usegmt=True)),  # an HTTP date
    st.sampled_from(
        [
            "",
            "s",
            "ms",
            ".5s",
            "5.s",
            "1..5s",
            " 5ms",
            "5ms ",
            "-5ms",
            "5 ms",
            "١٢ms",
            "1e3s",
            "nan",
            "inf",
            "soon",
            "2026-13-45T99:00:00Z",
            "2026-01-01Txx",
        ]
    ),
    st.text(max_size=12),
)

names = st.builds(
    lambda prefix, a, b: prefix + f"{a}-{b}",
    st.sampled_from(PREFIXES),
    st.sampled_from(["limit", "remaining", "reset", "requests", "tokens"]),
    st.sampled_from(["limit", "remaining", "reset", "requests", "tokens"]),
)
header_sets = st.lists(
    st.tuples(names | st.sampled_from(["Date", "Server", "x-request-id"]), values, st.booleans()),
    max_size=14,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, derandomize=True)
@given(headers=header_sets, prefix=st.sampled_from(PREFIXES))
def test_the_cheap_reading_says_what_the_plain_reading_says(headers, prefix):
    # Servers may send names in any case (HTTP/1.1 does not care): both readings must not either.
    sent = CIMultiDictProxy(
        CIMultiDict((name.title() if upper else name, value) for name, value, upper in headers)
    )
    with frozen_clock():
        try:
            expected = plain_reading(sent, prefix)
        except OverflowError:  # _int("inf") (issue 10, item 9): no reading to compare with
            assume(False)
        assert rate_info(sent, prefix) == expected


@settings(max_examples=400, deadline=None, derandomize=True)
@given(value=values)
def test_the_fast_forms_of_a_reset_read_as_the_generic_reading_does(value):
    with frozen_clock():
        assert outcome(seconds_until, value) == outcome(plain_seconds, value)


def test_the_headers_each_protocol_sends_on_every_reply():
    later = datetime.fromtimestamp(NOW + 30, UTC).isoformat()
    openai = CIMultiDictProxy(
        CIMultiDict(
            {
                "x-ratelimit-limit-requests": "10000",
                "x-ratelimit-remaining-requests": "9999",
                "x-ratelimit-reset-requests": "6ms",
                "x-ratelimit-limit-tokens": "2000000",
                "x-ratelimit-remaining-tokens": "1999500",
                "x-ratelimit-reset-tokens": "1.5s",
            }
        )
    )
    anthropic = CIMultiDictProxy(
        CIMultiDict(
            {
                "Anthropic-Ratelimit-Requests-Limit": "4000",
                "Anthropic-Ratelimit-Requests-Remaining": "0",
                "Anthropic-Ratelimit-Requests-Reset": later,
            }
        )
    )
    with frozen_clock():
        assert rate_info(openai, "x-ratelimit-") == RateInfo(
            10000, 9999, 0.006, 2000000, 1999500, 1.5
        )
        assert rate_info(anthropic, "anthropic-ratelimit-") == RateInfo(
            4000, 0, 30.0, None, None, None
        )
        assert rate_info(CIMultiDictProxy(CIMultiDict({"Date": "x"})), "x-ratelimit-") is None

"""Telling what may be a credential, so that no message, manifest or result ever holds one.

Keys are read from environment variables only (`api_key_env`). A key pasted into a config
(`api_key = "sk-..."`, inside `base_url`) is refused without printing it back.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# Field and parameter names that may hold a credential (api_key, x-api-key, access_token, but
# not max_tokens).
SECRET_NAME = re.compile(
    r"(?:^|[_.-])(?:api[_-]?key|key|token|secret|passw(?:or)?d?|pwd|auth\w*"
    r"|credentials?|bearer|signature|sig)(?:$|[_.-])",
    re.IGNORECASE,
)
# The published key formats (OpenAI/Anthropic sk-, Groq gsk_, Gemini AIza, ...).
KEY_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9])(?:(?:sk|gsk|xai|hf|ghp|pk|rk)[-_][A-Za-z0-9_-]{8,}"
    r"|AIza[A-Za-z0-9_-]{8,}|github_pat_\w{8,})"
)
# Any long random-looking run (letters and digits): may be a key of an unknown format. Only
# used to hide text, never to refuse a value, since an ordinary long name can match it.
LONG_TOKEN = re.compile(r"(?=[A-Za-z_-]*\d)(?=[0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}")

HOW_TO_PASS_A_KEY = (
    'to pass a key, export MY_KEY=<your key> and set api_key_env = "MY_KEY" on '
    "the model (keys are read from the environment only)"
)


def looks_secret(value: Any) -> bool:
    return isinstance(value, str) and bool(KEY_PREFIXED.search(value) or LONG_TOKEN.search(value))


def redact(text: str) -> str:
    """The text with anything that looks like a key replaced, for messages."""
    return LONG_TOKEN.sub("<hidden>", KEY_PREFIXED.sub("<hidden>", text))


def credential_in_url(url: str) -> str | None:
    """Where a URL carries a credential (its user part, a key-named query parameter, a key in
    the path), or None. The answer never contains the credential itself."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if "@" in parts.netloc:
        return "in its user part (before '@')"
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if SECRET_NAME.search(name) or KEY_PREFIXED.search(value):
            return f"in its query parameter '{redact(name)}'"
    if KEY_PREFIXED.search(parts.path) or KEY_PREFIXED.search(parts.fragment):
        return "in its path"
    return None

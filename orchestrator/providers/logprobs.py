"""Scoring calls on OpenAI-compatible `/v1/completions` (vLLM, llama-cpp-python's server): the prompt
and one continuation are sent with `echo` and `logprobs`, and the continuation's log-probability
is the sum over the echoed tokens that fall in it.

Tokens are placed by their own texts where these spell the prompt (servers differ in what their
`text_offset` counts: vLLM's include a start-of-text token's "<s>", llama-cpp-python's do not),
else by `text_offset`; either way the tokens taken must spell the continuation, or the call is
refused rather than scored on the wrong tokens.

One token is generated (and ignored): some servers read `max_tokens = 0` as "no limit". A token
reaching across the boundary into the continuation counts with it, since the continuation's
first characters are in it.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import orjson

from orchestrator.providers.errors import Fatal


def request(model: str, prefix: str, text: str, continuation: str) -> bytes:
    """`prefix` is sent before the text and is not counted in its offsets: a special token's
    text (the local server's start-of-text token, see providers/local.py)."""
    return orjson.dumps(
        {
            "model": model,
            "prompt": prefix + text + continuation,
            "max_tokens": 1,
            "temperature": 0,
            "echo": True,
            "logprobs": 1,
        }
    )


def _no_logprobs(what: str) -> Fatal:
    return Fatal(
        f"the server's /v1/completions answer has no prompt log-probabilities ({what})\n"
        '  fix: answers = "score" needs a server that echoes the prompt with logprobs '
        '(vLLM; llama-cpp-python\'s server started with logits_all); use answers = "generate" otherwise'
    )


def continuation_logprob(data: dict[str, Any], text: str, continuation: str) -> float:
    """Sum of the log-probabilities of the echoed tokens in `continuation` (after `text`)."""
    try:
        logprobs = data["choices"][0]["logprobs"]
        tokens, offsets, values = (
            logprobs["tokens"],
            logprobs["text_offset"],
            logprobs["token_logprobs"],
        )
    except (KeyError, IndexError, TypeError):
        raise _no_logprobs("no logprobs object") from None
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise _no_logprobs("no token texts")
    whole, joined = text + continuation, "".join(tokens)
    at = joined.find(whole)
    if at >= 0:  # place the tokens by their own texts: vLLM's offsets also count "<s>"
        offsets = [0, *itertools.accumulate(len(t) for t in tokens)][:-1]
    else:  # texts that do not spell the prompt (a character cut between tokens): the offsets
        at = 0
    start, end = at + len(text), at + len(whole)
    picked = [
        (token, v)
        for token, offset, v in zip(tokens, offsets, values, strict=False)
        if offset < end and offset + len(token) > start
    ]
    if not picked or continuation.strip() not in "".join(t for t, _ in picked):
        raise _no_logprobs("the echoed tokens do not spell the answer where it was sent")
    if any(not isinstance(v, int | float) or math.isnan(v) for _, v in picked):
        raise _no_logprobs("an answer token's log-probability is missing")
    return float(sum(v for _, v in picked))

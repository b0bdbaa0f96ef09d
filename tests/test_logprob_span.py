"""The continuation's tokens must be found in an echoed prompt whatever the
server counts in `text_offset`. vLLM adds the length of the start-of-text token's text ("<s>",
3 characters, for Llama 2 / Mistral) to every offset (vllm-project/vllm#5334 shows
`tokens ['<s>', ...], text_offset [0, 3, ...]`): the answer's tokens are then shifted 3
characters right of where `continuation_logprob` looks for them."""

from __future__ import annotations

import pytest

from orchestrator.providers.errors import Fatal
from orchestrator.providers.logprobs import continuation_logprob


def vllm_echo(pieces: list[tuple[str, float | None]], bos: str = "<s>") -> dict:
    """An echoed completion as vLLM lays it out: the start-of-text token first (no
    log-probability), offsets the running sum of the token texts, one generated token last."""
    tokens, offsets, values, at = [bos], [0], [None], len(bos)
    for text, value in pieces:
        tokens.append(text)
        offsets.append(at)
        values.append(value)
        at += len(text)
    tokens.append(" ok")
    offsets.append(at)
    values.append(-0.5)
    return {
        "choices": [
            {
                "logprobs": {
                    "tokens": tokens,
                    "text_offset": offsets,
                    "token_logprobs": values,
                    "top_logprobs": None,
                }
            }
        ]
    }


@pytest.mark.parametrize("option, digit_logprob", [(" Pan 1", -1.0), (" Pan 2", -7.0)])
def test_a_start_of_text_token_in_the_offsets_does_not_move_the_answer(option, digit_logprob):
    """log P(" Pan", " 1" | "Answer:") is -2 + digit; with the offsets shifted by "<s>", the
    sum must still be of the answer's own tokens (or the call refused), never of ":" and " Pan"
    alone, which would score every option alike and send every item to option 1."""
    data = vllm_echo([("Answer", -3.0), (":", -0.25), (" Pan", -2.0), (option[-2:], digit_logprob)])
    try:
        value = continuation_logprob(data, "Answer:", option)
    except Fatal:
        return  # refusing an answer it cannot place is acceptable
    assert value == pytest.approx(-2.0 + digit_logprob)

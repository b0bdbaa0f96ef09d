"""Usage summed over a task's several calls (a scored answer's options, an audit's retry)."""

from orchestrator.engine.caller import add_usage


def test_usage_is_summed_key_by_key_and_a_count_one_call_lacks_counts_as_zero():
    assert add_usage({"prompt_tokens": 10, "completion_tokens": 2}, {"prompt_tokens": 5}) == {
        "prompt_tokens": 15,
        "completion_tokens": 2,
    }
    assert add_usage({"prompt_tokens": 5}, {"prompt_tokens": 1, "completion_tokens": 3}) == {
        "prompt_tokens": 6,
        "completion_tokens": 3,
    }
    assert add_usage(None, {"prompt_tokens": 1}) == {"prompt_tokens": 1}
    assert add_usage({"prompt_tokens": 1}, None) == {"prompt_tokens": 1}

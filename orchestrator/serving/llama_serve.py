"""`python -m orchestrator.serving.llama_serve ARGS`: llama-cpp-python's OpenAI-compatible
server (the same arguments as `python -m llama_cpp.server`), with its prompt log-probabilities
made fast enough to score answers with.

For a completion with `echo` and `logprobs`, llama-cpp-python (0.3.x) sorts the whole vocabulary
in Python for every prompt token, to list the top `logprobs` alternatives: measured here, 70 ms
a token and 6 s for one scored SmolLM2 prompt whose evaluation takes 20 ms. That one sort is
replaced by numpy's partial sort of the top 20 (the most a client may ask, as with OpenAI); every
value returned is still the library's own (a client asking for more than 20 alternatives gets
20). If the library's code no longer has that sort, nothing is changed.
"""

from __future__ import annotations

import builtins
import inspect
import re
import sys

import numpy as np

TOP = 20
_PATTERN = re.compile(
    r"sorted\(\s*zip\(logprobs_token,\s*range\(len\(logprobs_token\)\)\),\s*reverse=True,?\s*\)"
)


class _Row:
    """What `zip(row, range(len(row)))` stands for, still unzipped."""

    __slots__ = ("row",)

    def __init__(self, row: np.ndarray) -> None:
        self.row = row

    def __iter__(self):
        return builtins.zip(self.row, range(len(self.row)))


def _zip(*iterables):
    first = iterables[0] if iterables else None
    if (
        len(iterables) == 2
        and isinstance(first, np.ndarray)
        and first.ndim == 1
        and iterables[1] == range(len(first))
    ):
        return _Row(first)
    return builtins.zip(*iterables)


def _sorted(iterable, *, key=None, reverse=False):
    if isinstance(iterable, _Row) and key is None and reverse:
        row = iterable.row
        k = min(TOP, len(row))
        top = np.argpartition(row, len(row) - k)[len(row) - k :]
        # as sorted() on (value, index) pairs, highest first: ties by the higher index
        top = top[np.lexsort((top, row[top]))][::-1]
        return [(row[i], int(i)) for i in top]
    return builtins.sorted(iterable, key=key, reverse=reverse)


def patch() -> bool:
    """Patch llama_cpp.llama's module-level names `zip` and `sorted`; False if its code is not
    the one this was written for."""
    import llama_cpp.llama as module

    if not _PATTERN.search(inspect.getsource(module.Llama._create_completion)):
        return False
    module.zip, module.sorted = _zip, _sorted
    return True


def main() -> None:
    patch()
    from llama_cpp.server.__main__ import main as serve

    sys.argv[0] = "llama_cpp.server"
    serve()


if __name__ == "__main__":
    main()

"""`python -m orchestrator.serving.llama_serve ARGS`: llama-cpp-python's OpenAI-compatible
server (the same arguments as `python -m llama_cpp.server`), with two changes.

AMX. A llama.cpp build compiled with AMX (pip's default `-march=native` on an Intel CPU that has
it) repacks Q4 weights for its AMX kernels, which crash with SIGSEGV on the first completion
(ggml-org/llama.cpp#20824). When both the build and this CPU have AMX, the model loads without
llama.cpp's extra buffer types (`use_extra_bufts`, the repacked weights), so those kernels never
run. The portable build of `llama_build.py` has no AMX; this keeps any other build working.

Log-probabilities, made fast enough to score answers with.

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

from orchestrator.serving.llama_build import cpu_info

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


def keep_amx_off(system_info: bytes | None = None, cpu_flags: set[str] | None = None) -> bool:
    """Load models without the AMX repacking when this build and this CPU both have AMX;
    True if it did so."""
    import llama_cpp
    import llama_cpp.llama_cpp as bindings  # the name Llama() looks the defaults up in

    info = bindings.llama_print_system_info() if system_info is None else system_info
    flags = set(cpu_info("flags").get("flags", "").split()) if cpu_flags is None else cpu_flags
    if b"AMX_INT8 = 1" not in info or "amx_int8" not in flags:
        return False
    defaults = bindings.llama_model_default_params

    def without_repacking():
        params = defaults()
        params.use_extra_bufts = False
        return params

    # Llama() reads it at each load, from the bindings module; the package re-exports it
    bindings.llama_model_default_params = without_repacking
    llama_cpp.llama_model_default_params = without_repacking
    print(
        "llama_serve: this llama.cpp build and this CPU have AMX; weights are not repacked "
        "for AMX (its kernels crash, ggml-org/llama.cpp#20824)",
        file=sys.stderr,
        flush=True,
    )
    return True


def main() -> None:
    patch()
    keep_amx_off()
    from llama_cpp.server.__main__ import main as serve

    sys.argv[0] = "llama_cpp.server"
    serve()


if __name__ == "__main__":
    main()

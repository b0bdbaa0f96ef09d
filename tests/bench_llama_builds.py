"""The local model's speed under each llama.cpp build (issue 41): `python -m tests.bench_llama_builds`.

Not part of `make bench`: it compiles each build the first time (a few minutes each on 2 cores;
kept in .venv/llama-wheels by their flags, as `make llama` keeps them). Each build's wheel is
unpacked beside the others and loaded in a process of its own (PYTHONPATH puts its llama_cpp
first); rounds alternate between builds, so that the machine's load falls on all alike. Each
round loads SmolLM2-135M-Instruct (Q4_1), evaluates a prompt of ~300 tokens and generates 64
tokens at temperature 0, two threads. Figures: medians over the rounds, tokens per second, and
each build's share of the native build's speed.

    python -m tests.bench_llama_builds [--rounds 5] [--wheel NAME=PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from orchestrator.serving import llama_build

AVX512 = llama_build.PORTABLE.replace("-DGGML_AVX512=OFF", "-DGGML_AVX512=ON") + (
    " -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
)
BUILDS = {
    "native (-march=native)": llama_build.NATIVE,
    "portable AVX2 (the default)": llama_build.PORTABLE,
    "portable AVX2 + AVX-512, no AMX": AVX512,
}

_ROUND = r"""
import json, sys, time
import llama_cpp
from llama_cpp import Llama
path, n = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
llm = Llama(path, n_ctx=1024, n_threads=2, verbose=False, seed=1)
load = time.perf_counter() - t0
prompt = ("Estimate the number of African countries in the United Nations. " * 30)[:1400]
tokens = llm.tokenize(prompt.encode())
t0 = time.perf_counter()
llm.eval(tokens)
prompt_s = time.perf_counter() - t0
llm.reset()
t0 = time.perf_counter()
out = llm.create_completion("Q: Name three colours.\nA:", max_tokens=n, temperature=0.0)
gen_s = time.perf_counter() - t0
made = out["usage"]["completion_tokens"]
info = llama_cpp.llama_print_system_info().decode()
print(json.dumps({"load_s": load, "prompt_tps": len(tokens) / prompt_s,
                  "gen_tps": made / gen_s, "tokens": made, "info": info}))
"""


def _unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        z.extractall(into)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument(
        "--wheel", action="append", default=[], help="NAME=PATH: measure this wheel as NAME"
    )
    args = parser.parse_args()
    from orchestrator.spec.localmodel import default_model_path

    model = default_model_path()
    wheels: dict[str, Path] = {}
    for given in args.wheel:
        name, _, path = given.rpartition("=")
        wheels[name] = Path(path)
    if not wheels:
        folder = Path(sys.prefix) / "llama-wheels"
        for name, flags in BUILDS.items():
            wheels[name] = llama_build.build(llama_build.LLAMA_CPP, flags, folder)
    with tempfile.TemporaryDirectory() as tmp:
        roots = {name: _unpack(w, Path(tmp) / str(i)) for i, (name, w) in enumerate(wheels.items())}
        figures: dict[str, list[dict]] = {name: [] for name in roots}
        for r in range(args.rounds):
            for name, root in roots.items():
                env = {**os.environ, "PYTHONPATH": str(root)}
                done = subprocess.run(
                    [sys.executable, "-c", _ROUND, str(model), str(args.tokens)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                figures[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    base = next(iter(figures))
    med = {
        name: {
            k: statistics.median(f[k] for f in rows) for k in ("prompt_tps", "gen_tps", "load_s")
        }
        for name, rows in figures.items()
    }
    print(
        f"| build | prompt tokens/s | generated tokens/s | load s | vs {base} (prompt, generation) |"
    )
    print("|---|---|---|---|---|")
    for name, m in med.items():
        print(
            f"| {name} | {m['prompt_tps']:.0f} | {m['gen_tps']:.1f} | {m['load_s']:.2f} | "
            f"{m['prompt_tps'] / med[base]['prompt_tps']:.2f}, "
            f"{m['gen_tps'] / med[base]['gen_tps']:.2f} |"
        )
    for name, rows in figures.items():
        print(f"{name}: {rows[0]['info'].strip()}")


if __name__ == "__main__":
    main()

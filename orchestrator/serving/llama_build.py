"""Build and install llama-cpp-python (the local model's server) for the CPUs it will meet.

    python -m orchestrator.serving.llama_build            # portable: any x86-64 CPU with AVX2
    python -m orchestrator.serving.llama_build --native   # tuned for this machine only

pip compiles llama-cpp-python from source with llama.cpp's default, `-march=native`. Such a
build crashes on Intel CPUs with AMX (llama.cpp repacks Q4 weights for its AMX kernels, which
segfault: ggml-org/llama.cpp#20824), and one made on an AVX-512 machine dies with SIGILL on a CPU
without it. The portable build turns native tuning off and names the instruction sets itself:
AVX2, FMA, F16C and BMI2 (Intel Core since 2013, AMD since 2015); no AVX-512, no AMX.
docs/local-model.md has the speed of each choice.

pip's wheel cache keys a built wheel by the source, not by CMAKE_ARGS: after a change of flags
it would install the old build again. So this builds with `--no-cache-dir` into a folder named
after the flags (and, for a native build, after this CPU), and installs the wheel with
`--force-reinstall`, even over the same version. It records what it installed beside the
interpreter (`<venv>/llama-build.json`), so a second call with the same flags does nothing.

Standard library only: the Makefile runs this file by its path before the package is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

# The one pin of the local model's server (tests/test_llama_build.py checks pyproject's is it).
LLAMA_CPP = "llama-cpp-python==0.3.36"

PORTABLE = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON "
    "-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
)
NATIVE = "-DGGML_NATIVE=ON"


def cpu_info(*names: str) -> dict[str, str]:
    """The first CPU's `names` fields of /proc/cpuinfo ("model name", "flags"); {} elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name in names and name not in found:
            found[name] = value.strip()
    return found


def cpu_identity() -> str:
    """This CPU's model and instruction sets: what a native build is made for."""
    info = cpu_info("model name", "flags")
    if not info:
        return platform.processor() or platform.machine()
    return f"{info.get('model name', '')}\n{info.get('flags', '')}"


def _package(source: str) -> str:
    """The package name a pip requirement starts with ('llama-cpp-python==0.3.36')."""
    return re.split(r"[<>=!~\[ ;@]", source, maxsplit=1)[0]


def build_key(source: str, cmake_args: str) -> str:
    """Names the wheel folder: the same source and flags (and, for native tuning, the same CPU)
    give the same wheel; anything else another one."""
    parts = [source, " ".join(cmake_args.split())]
    if "-DGGML_NATIVE=OFF" not in cmake_args.split():
        parts.append(cpu_identity())  # native tuning: a wheel for this CPU alone
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _pip(python: str, *args: str, env: dict[str, str] | None = None) -> None:
    cmd = [python, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def build(source: str, cmake_args: str, wheels: Path, python: str = sys.executable) -> Path:
    """The wheel of `source` built with `cmake_args`: from `wheels`/KEY if built before, else
    built there now, never from pip's cache."""
    folder = wheels / build_key(source, cmake_args)
    found = sorted(folder.glob("*.whl"))
    if found:
        print(f"llama-cpp-python: reusing the wheel built with these flags: {found[-1]}")
        return found[-1]
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"llama-cpp-python: compiling with CMAKE_ARGS={cmake_args!r} (a few minutes on 2 cores)",
        flush=True,
    )
    env = {**os.environ, "CMAKE_ARGS": cmake_args}
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
    partial = folder / "partial"
    # From source always: a ready-made wheel on some index would ignore CMAKE_ARGS.
    name = _package(source)
    source_only = ["--no-binary", name] if re.fullmatch(r"[A-Za-z0-9._-]+", name) else []
    _pip(
        python,
        "wheel",
        "--no-deps",
        "--no-cache-dir",
        *source_only,
        "-w",
        str(partial),
        source,
        env=env,
    )
    (wheel,) = partial.glob("*.whl")
    return wheel.rename(folder / wheel.name)  # only a whole wheel is ever found above


def installed_record(prefix: Path) -> dict:
    try:
        return json.loads((prefix / "llama-build.json").read_text())
    except (OSError, ValueError):
        return {}


def installed_from(python: str, source: str) -> str | None:
    """The file pip installed `source`'s package from, in `python`'s environment (its
    direct_url.json), or None: reinstalled another way, or not installed."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "try: print(json.loads(m.distribution(sys.argv[1]).read_text('direct_url.json'))['url'])\n"
        "except Exception: print('')"
    )
    done = subprocess.run([python, "-c", code, _package(source)], capture_output=True, text=True)
    return done.stdout.strip() or None


def install(
    source: str, cmake_args: str, wheels: Path, python: str = sys.executable, extra: str = ""
) -> bool:
    """Build (or reuse) and install the wheel into `python`'s environment; False when the same
    build is installed already."""
    prefix = Path(
        subprocess.run(
            [python, "-c", "import sys; print(sys.prefix)"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    key = build_key(source, cmake_args)
    record = installed_record(prefix)
    # Installed already only if pip's own record says it came from the wheel of these flags:
    # a `pip install -U` or a reinstall of the project since would have replaced it.
    if record.get("key") == key and installed_from(python, source) == record.get("url"):
        print(f"llama-cpp-python: this build ({key}) is installed already")
        return False
    wheel = build(source, cmake_args, wheels, python)
    _pip(python, "install", "--no-deps", "--force-reinstall", "--no-cache-dir", str(wheel))
    if extra:  # the extra's own dependencies; the package itself is the one just installed
        _pip(python, "install", f"{wheel}[{extra}]")
    record = {
        "key": key,
        "source": source,
        "cmake_args": cmake_args,
        "url": installed_from(python, source),
    }
    (prefix / "llama-build.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"llama-cpp-python: installed the build {key} ({cmake_args})")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator.serving.llama_build",
        description="Build llama-cpp-python (the local model's server) and install it into this "
        "Python's environment. Default: a portable build that runs on any x86-64 CPU with AVX2, "
        "Intel CPUs with AMX included. A build is compiled once per set of flags; pip's cache is "
        "never used, so a change of flags always rebuilds.",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--native",
        action="store_true",
        help="tune for this machine's CPU (llama.cpp's default); the build may crash on others",
    )
    which.add_argument(
        "--cmake-args", help="your own CMake flags for llama.cpp, e.g. for CUDA: -DGGML_CUDA=ON"
    )
    parser.add_argument(
        "--wheels",
        type=Path,
        default=Path(sys.prefix) / "llama-wheels",
        help="where built wheels are kept, one folder per set of flags (default: %(default)s)",
    )
    parser.add_argument(
        "--source", default=LLAMA_CPP, help="what pip builds (default: %(default)s)"
    )
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter to install into (default: this)"
    )
    args = parser.parse_args(argv)
    cmake_args = args.cmake_args or (NATIVE if args.native else PORTABLE)
    try:
        install(args.source, cmake_args, args.wheels, args.python, extra="server")
    except subprocess.CalledProcessError as exc:
        print(
            f"error: {' '.join(map(str, exc.cmd))} failed (exit {exc.returncode})", file=sys.stderr
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

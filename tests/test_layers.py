"""The layer contract (pyproject's [tool.importlinter], docs/architecture.md) holds, and would
catch the day a lower layer imports a higher one; the command line's help stays light."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is a dev extra")


def _lint(tree: Path) -> subprocess.CompletedProcess:
    """lint-imports over the package in `tree` (found first on the path), with its config."""
    env = os.environ | {"PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT), str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "orchestrator", tree / "orchestrator", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_tree_keeps_its_layers(tmp_path):
    done = _lint(_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("engine/store.py", "orchestrator.session"),  # the engine reaching for the run's wiring
        ("spec/jobs.py", "orchestrator.studies"),  # spec importing the registry it is passed
        ("nightly/history.py", "orchestrator.cli.ui"),  # a library module using the console
        ("cli/ui.py", "orchestrator.errors"),  # the command line's leaf importing the project
        ("serving/llama.py", "orchestrator.cluster.head"),  # the server leaf reaching up to Ray
        ("providers/http.py", "orchestrator.emulator.server"),  # the engine on the test double
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, upward):
    tree = _copy(tmp_path)
    path = tree / "orchestrator" / module
    path.write_text(path.read_text() + f"\nimport {upward}  # noqa\n")
    done = _lint(tree)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BROKEN" in done.stdout and upward in done.stdout


def test_help_imports_no_polars():
    """`orchestrator --help` (and each command's) loads no polars, numpy or scipy: a user
    asking for help waits for nothing (the work is imported when a command runs)."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from orchestrator.cli import app\n"
        "for args in (['--help'], ['run', '--help'], ['export', '--help'], ['compare', '--help']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'polars', 'numpy', 'scipy', 'matplotlib'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

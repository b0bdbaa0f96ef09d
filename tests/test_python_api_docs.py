"""docs/python-api.md's examples, each run as a user would paste it: `python -c`, one after the
other in one new folder (a later one reads the run an earlier one made), with the package as
installed. Each must exit 0 and print what its comments say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PAGE = Path(__file__).parents[1] / "docs" / "python-api.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_python_api_pages_examples_run(tmp_path: Path) -> None:
    found = examples()
    assert len(found) >= 6
    bin_dir = str(Path(sys.executable).parent)  # `orchestrator init` as the user's shell finds it
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    printed = []
    for code in found:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{code}\n---\n{done.stdout}\n{done.stderr}"
        printed.append(done.stdout)
    by_text = dict(zip(found, printed, strict=True))
    first = next(out for code, out in by_text.items() if 'name="quick"' in code)
    assert first.split() == ["runs/quick/default", "True"]
    mistakes = next(out for code, out in by_text.items() if "temprature" in code)
    assert "temprature -> did you mean 'temperature'?" in mistakes
    assert "field 'samples'" in mistakes
    assert (tmp_path / "runs" / "quick" / "default" / "export" / "parquet").is_dir()

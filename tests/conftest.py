from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.emulator.server import Emulator, EmulatorConfig, Faults

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def emulator():
    """Start emulators (real HTTP servers on loopback) for a test; all are stopped after it."""
    servers = []

    def start(
        faults: Faults | None = None, latency_s: float = 0.0, seed: int = 1, **limits
    ) -> Emulator:
        server = Emulator(
            EmulatorConfig(faults=faults or Faults(), latency_s=latency_s, seed=seed, **limits)
        ).start_in_thread()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


def write_config(tmp_path: Path, body: str, name: str = "campaign.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def openai_config(
    tmp_path: Path,
    url: str,
    *,
    samples: int = 5,
    limits: str = "",
    run_id: str = "r1",
    extra: str = "",
) -> Path:
    return write_config(
        tmp_path,
        f"""
        name = "t"
        jobs = ["paired"]
        samples = {samples}
        seed = 3
        run_id = "{run_id}"
        output_dir = "{tmp_path / "runs"}"
        {extra}
        [[models]]
        provider = "openai"
        name = "fake-model"
        base_url = "{url}"
        temperature = 0.7
        [limits.openai]
        {limits}
        """,
    )


def run_quietly(config: Path):
    """Run a campaign config in-process, as `orchestrator run` would, with no output."""
    from orchestrator.session import load_campaign, run_campaign

    with open(os.devnull, "w") as sink:
        return run_campaign(load_campaign(config), Console(file=sink), handle_signals=False)


def cli(
    *args: str, cwd: Path, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`orchestrator ARGS` in a process of its own, as a user runs it (stdin given, if any)."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
    )

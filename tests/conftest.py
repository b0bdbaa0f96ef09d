from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

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


class _Runner(CliRunner):
    """CliRunner whose command finds the consoles a process starting now would make: ui.py's
    own, made anew on the runner's stdout and stderr (no terminal) with this COLUMNS."""

    @contextlib.contextmanager
    def isolation(self, *args, **kwargs):
        from orchestrator.cli import ui

        with super().isolation(*args, **kwargs) as streams:
            spec = importlib.util.find_spec(ui.__name__)
            fresh = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(fresh)
            ui.console, ui.err_console = fresh.console, fresh.err_console
            yield streams


def cli(
    *args: str, cwd: Path, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`orchestrator ARGS` run in this process (Typer's CliRunner) as a user runs it in `cwd`,
    stdin given, if any: its exit code, stdout and stderr apart, as `cli_process` returns them.

    What a command changes of the process is put back after it: the current folder, sys.argv
    (resume commands are built from it, so they read as the user's), the consoles, the signal
    handlers, the environment. An exception other than SystemExit fails the test with its
    traceback and what the command printed; so does a command still going after `timeout`
    seconds (a SIGALRM stops it, as cli_process's timeout would: an emulator or viewer that
    wrongly starts serving would otherwise hang the tests)."""
    from orchestrator.cli import app, ui

    def too_long(*_) -> None:
        raise TimeoutError(f"orchestrator {shlex.join(args)} still going after {timeout:g} s")

    saved = (
        sys.argv,
        ui.console,
        ui.err_console,
        {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)},
        dict(os.environ),
    )
    sys.argv = ["orchestrator", *args]
    signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.chdir(cwd):
            result = _Runner().invoke(app, list(args), input=stdin, prog_name="orchestrator")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.argv, ui.console, ui.err_console, handlers, environ = saved
        for number, handler in handlers.items():
            if handler is not None:  # None: not set from Python, so not changed from Python
                signal.signal(number, handler)
        if os.environ != environ:
            os.environ.clear()
            os.environ.update(environ)
    # A Ctrl-C or SIGTERM that stopped the command was for the tests too (around a process it
    # reaches them as well): sent again, now to them.
    cause = result.exception
    while cause is not None and not isinstance(cause, KeyboardInterrupt):
        cause = cause.__context__  # click's "Aborted!" exit 1 comes of a KeyboardInterrupt
    if result.exit_code == 128 + signal.SIGTERM:
        signal.raise_signal(signal.SIGTERM)
    if cause is not None or result.exit_code == 128 + signal.SIGINT:
        signal.raise_signal(signal.SIGINT)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        result.exception.add_note(
            f"in: orchestrator {shlex.join(args)}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
        raise result.exception
    return subprocess.CompletedProcess(
        ["orchestrator", *args], result.exit_code, result.stdout, result.stderr
    )


def cli_process(
    *args: str, cwd: Path, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`orchestrator ARGS` in a process of its own, as a user runs it (stdin given, if any):
    for what only a real process shows (signals, kill -9, two processes contending for a lock,
    `python -m orchestrator` itself)."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
    )

"""A KeyboardInterrupt in the middle of `orchestrator.run` stops the run as Ctrl-C stops the CLI:
results written stay, the lock is let go, and the same call resumes, each task once. Shown in
processes of their own (a script; a script whose blocking call runs inside asyncio.run, which
answers Ctrl-C by cancelling its task) and in a real Jupyter kernel, interrupted as its
notebook's stop button does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

import orchestrator

pytestmark = pytest.mark.slow

CAMPAIGN = """
import orchestrator

campaign = orchestrator.Campaign(
    name="api",
    jobs=["paired"],
    samples=40,
    output_dir={runs!r},
    models=[
        orchestrator.Model(
            provider="simulated", name="sim", temperature=1.0, simulate={{"latency_ms": 40.0}}
        )
    ],
    limits={{"simulated": {{"max_in_flight": 4}}}},
)
"""
TOTAL = 12 * 40


def terminal_ids(run_dir: Path) -> list[str]:
    lines = (run_dir / "results.ndjson").read_bytes().splitlines()
    return [r["taskId"] for r in map(orjson.loads, lines) if r["status"] != "failed"]


def wait_for_results(results: Path, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + 60
    while not (results.exists() and results.stat().st_size > 5_000):
        assert time.monotonic() < deadline, "the run wrote nothing in 60 s"
        assert process is None or process.poll() is None, process.communicate()
        time.sleep(0.02)


def resumes_each_task_once(run_dir: Path, first: list[str], setup: str) -> None:
    assert 0 < len(first) < TOTAL
    namespace: dict = {}
    exec(setup, namespace)
    orchestrator.run(namespace["campaign"], progress=False)
    done = terminal_ids(run_dir)
    assert len(done) == len(set(done)) == TOTAL
    assert done[: len(first)] == first


@pytest.mark.parametrize("inside_a_loop", [False, True], ids=["script", "inside-asyncio-run"])
def test_ctrl_c_stops_the_run_cleanly_and_it_resumes(tmp_path: Path, inside_a_loop: bool) -> None:
    setup = CAMPAIGN.format(runs=str(tmp_path / "runs"))
    call = "orchestrator.run(campaign)"
    if inside_a_loop:  # asyncio.run cancels its task on Ctrl-C, then raises KeyboardInterrupt
        call = f"import asyncio\n\nasync def main():\n    {call}\n\nasyncio.run(main())"
    script = tmp_path / "script.py"
    script.write_text(setup + "\n" + call + "\n")
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    run_dir = tmp_path / "runs" / "api" / "default"
    wait_for_results(run_dir / "results.ndjson", process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode in (1, 130, -signal.SIGINT), err
    assert "KeyboardInterrupt" in err
    assert "interrupted; finished results are saved" in err + out
    assert f"orchestrator.run('{run_dir}')" in err + out
    resumes_each_task_once(run_dir, terminal_ids(run_dir), setup)


def test_interrupting_a_jupyter_kernel_stops_the_run_and_it_resumes(tmp_path: Path) -> None:
    """A real kernel (ipykernel, driven by jupyter_client as a notebook's front end does): the
    cell that runs the campaign shows its progress in a display that updates in place; the
    kernel's interrupt ends the cell with KeyboardInterrupt and the run cleanly; running the
    cell again resumes it."""
    from jupyter_client.manager import start_new_kernel

    setup = CAMPAIGN.format(runs=str(tmp_path / "runs"))
    run_dir = tmp_path / "runs" / "api" / "default"
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        client.execute_interactive(setup, timeout=60)
        messages: list[dict] = []
        cell = client.execute("run = orchestrator.run(campaign)")
        wait_for_results(run_dir / "results.ndjson")
        time.sleep(0.5)  # a display update or two
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != cell:
            reply = client.get_shell_msg(timeout=60)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        while True:
            message = client.get_iopub_msg(timeout=10)
            if message["parent_header"].get("msg_id") == cell:
                messages.append(message)
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                break
        first = terminal_ids(run_dir)
        shown = [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
        assert any("progress sim" in m["content"]["data"]["text/plain"] for m in shown)
        assert any(m["msg_type"] == "update_display_data" for m in shown)
        printed = "".join(m["content"].get("text", "") for m in messages)
        assert "interrupted; finished results are saved" in printed
        again = client.execute_interactive(
            "run = orchestrator.run(campaign); print(run.status()['complete'])", timeout=120
        )
        assert again["content"]["status"] == "ok"
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    done = terminal_ids(run_dir)
    assert 0 < len(first) < TOTAL
    assert len(done) == len(set(done)) == TOTAL and done[: len(first)] == first


def test_the_quickstart_notebook_executes(tmp_path: Path) -> None:
    """docs/notebooks/quickstart.ipynb, every cell run by nbclient on ipykernel: the run shows
    its progress, and the plot is drawn."""
    import nbformat
    from nbclient import NotebookClient

    notebook = Path(__file__).parents[1] / "docs" / "notebooks" / "quickstart.ipynb"
    nb = nbformat.read(notebook, as_version=4)
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the notebook's runs go to a temp folder
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    old = dict(os.environ)
    os.environ.update(env)
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    texts = [str(o.get("data", {}).get("text/plain", "")) + o.get("text", "") for o in outputs]
    assert any("progress simulated/sim-respondent: 360/360 done" in t for t in texts)
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert not [o for o in outputs if o.output_type == "error"]
    assert list(tmp_path.glob("tmp*/runs/quickstart/default/results.ndjson"))

"""For the Ray tests: a real Ray cluster on this machine (`ray start --head --block`, stopped after
the tests), what Ray itself says about it (from a driver of its own), and the processes under a
process, read from /proc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.cluster.head import STARTED
from orchestrator.cluster.token import ensure_token
from orchestrator.processes import die_with_parent, free_port, stop_process

ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}  # as the engine's own cluster
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1"  # what names the replicas (providers/replicas.py)


@dataclass
class Cluster:
    address: str
    proc: subprocess.Popen
    cpus: int

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, **ENV}

    def ask(self) -> dict:
        """Ray's own view: the replica actors alive (named actors of the engine's namespace)
        and the CPUs not held by any actor."""
        code = textwrap.dedent(f"""
            import json, ray
            ray.init(address={self.address!r}, logging_level="ERROR", log_to_driver=False)
            names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                     if a["namespace"] == "bias-orchestrator"]
            print(json.dumps({{"replicas": names, "free_cpus": ray.available_resources().get("CPU", 0)}}))
            """)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=self.env, timeout=120
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    def settled(self, timeout_s: float = 90) -> dict:
        """Ray's view once no replica is left and every CPU is free (or the last view)."""
        deadline = time.monotonic() + timeout_s
        while True:
            view = self.ask()
            if (
                not view["replicas"] and view["free_cpus"] == self.cpus
            ) or time.monotonic() > deadline:
                return view
            time.sleep(1)


def start_cluster(cpus: int = 3) -> Cluster:
    ensure_token(print)  # as the engine's own cluster: a machine that never ran Ray has none
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--head",
            "--block",
            f"--port={port}",
            f"--num-cpus={cpus}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **ENV},
        preexec_fn=die_with_parent,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        log.seek(0)
        if STARTED in log.read().decode(errors="replace"):
            return Cluster(f"127.0.0.1:{port}", proc, cpus)
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    log.seek(0)
    proc.kill()
    raise RuntimeError(f"ray start failed:\n{log.read().decode(errors='replace')[-3000:]}")


def stop_cluster(cluster: Cluster) -> None:
    stop_process(cluster.proc, 60)


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process now."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmd.strip())
    return out


def descendants(pid: int) -> dict[int, str]:
    """Every process under `pid` (children, theirs, ...), with its command line."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = table[child][1]
            todo.append(child)
    return found


def replicas_under(pid: int) -> list[int]:
    return sorted(p for p, cmd in descendants(pid).items() if cmd.startswith("ray::LlamaReplica"))


def servers_under(pid: int) -> list[int]:
    return sorted(
        p
        for p, cmd in descendants(pid).items()
        if "llama_cpp.server" in cmd or "orchestrator.serving.llama_serve" in cmd
    )


def servers_on(urls) -> list[int]:
    """Live llama.cpp servers listening on any of these base URLs' ports, wherever they are in
    the process tree (a server whose actor died without it would be re-parented, not gone)."""
    ports = {url.rsplit(":", 1)[1].split("/")[0] for url in urls if url}
    return sorted(
        p
        for p, (_, cmd) in _processes().items()
        if "llama" in cmd and alive([p]) and any(f"--port {port} " in cmd + " " for port in ports)
    )


def alive(pids) -> list[int]:
    """Those of `pids` still running (a zombie has ended)."""
    return [p for p in pids if _state(p) not in ("Z", "X", "gone")]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def wait_until(check, timeout_s: float, every_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every_s)

"""The Ray cluster a run's replicas go on: the one at the model's `address`, or, when it names
none, a cluster of this machine alone that lives exactly as long as the run.

The run's own cluster is `ray start --head --block` as a child process that dies with us: on
SIGTERM it stops every Ray process it started, and the kernel sends it that signal when this
process ends in any way, kill -9 included (PR_SET_PDEATHSIG). Replicas on a cluster we only
joined are owned by this process, so Ray destroys them when it goes.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from orchestrator.errors import UserError

STARTED = "Ray runtime started."
# No usage report (no internet here, and none wanted); token authentication on the run's own
# cluster, which listens on this machine's address: its token lies in ~/.ray, Ray's own place.
_OWN_CLUSTER_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}


def needs_ray() -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise UserError("backend = \"ray\" needs Ray, which is not installed",
                        field="models[].server.backend",
                        fix="install the ray extra: pip install 'bias-orchestrator[ray]' "
                            "(in a checkout pip install -e '.[ray]')")


class Head:
    """A connection to a Ray cluster, and the cluster itself when the run started it."""

    def __init__(self, address: str | None, timeout_s: float) -> None:
        self.address, self.timeout_s = address, timeout_s
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile(prefix="ray-head-", suffix=".log")

    @property
    def own(self) -> bool:
        return self.proc is not None

    def connect(self) -> str:
        """Join (or start, then join) the cluster; returns its address. Blocking."""
        address = self.address
        if address is None:
            address = self._start()  # before Ray is imported: it reads its token mode then
        import ray

        try:
            ray.init(address=address, namespace="bias-orchestrator", log_to_driver=False,
                     logging_level="ERROR", configure_logging=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            self.stop()
            raise UserError(f"cannot join the Ray cluster at {address}: {exc}",
                            field="models[].server.address",
                            fix="start the cluster first (ray start --head on one node, ray start "
                                "--address=HEAD:PORT on the others), or remove address to run a "
                                "cluster of this machine alone") from None
        return address

    def _start(self) -> str:
        from orchestrator.providers.local import die_with_parent, free_port

        os.environ.update(_OWN_CLUSTER_ENV)  # this process must use the token mode it starts
        port = free_port()
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
               f"--port={port}", f"--num-cpus={os.cpu_count() or 1}", "--include-dashboard=false",
               "--disable-usage-stats"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env={**os.environ, **_OWN_CLUSTER_ENV},
                                     preexec_fn=die_with_parent if sys.platform == "linux" else None)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if STARTED in self._printed():
                return f"127.0.0.1:{port}"
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = "\n      ".join(self._printed().strip().splitlines()[-8:])
        self.stop()
        raise UserError(f"the Ray cluster for this run did not start within {self.timeout_s:g} s:"
                        f"\n      {tail}", field="models[].server.startup_timeout_s",
                        fix="raise startup_timeout_s, or start a cluster yourself (ray start "
                            "--head) and set address = \"auto\"")

    def _printed(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        """Leave the cluster, and stop it if it is the run's own. Blocking."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        from orchestrator.providers.local import stop_process

        stop_process(self.proc, 30)  # `ray start --block` stops its processes on SIGTERM
        self.log.close()

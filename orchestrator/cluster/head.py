"""The Ray cluster a run's replicas go on: the one at the models' `address`, or, when they name
none, a cluster of this machine alone that lives exactly as long as the run.

One process has one Ray connection, so every model on Ray shares it (`join` / `leave`, counted),
and the campaign's models all name the same address (spec/build.py checks that at load).

The run's own cluster is `ray start --head --block` as a child process that dies with us: on
SIGTERM it stops every Ray process it started, and the kernel sends it that signal when this
process ends in any way, kill -9 included (PR_SET_PDEATHSIG). That signal follows the thread
that started the child, so it is started on the event loop's thread, which lives as long as the
run, never on a worker thread that may end before. Replicas on a cluster we only joined are
owned by this process, so Ray destroys them when it goes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import anyio

from orchestrator.cluster.token import FIX as TOKEN_FIX
from orchestrator.cluster.token import ensure_token
from orchestrator.errors import UserError
from orchestrator.processes import child_env, die_with_parent, free_port, stop_process

STARTED = "Ray runtime started."
NAMESPACE = "bias-orchestrator"
# No usage report (no internet here, and none wanted); token authentication on the run's own
# cluster, which listens on this machine's address: its token is where Ray looks (token.py).
# The own cluster is this machine alone, so it is told so: Ray otherwise replaces a loopback
# node address by the machine's own and listens there (what it does on macOS and Windows,
# where clusters are off by default, is what this switch asks for).
_OWN_CLUSTER_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
}


def needs_ray() -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        raise UserError(
            'backend = "ray" needs Ray, which is not installed',
            field="models[].server.backend",
            fix="install the ray extra: pip install 'bias-orchestrator[ray]' "
            "(in a checkout pip install -e '.[ray]')",
        )


class Head:
    """A connection to a Ray cluster, and the cluster itself when the run started it."""

    def __init__(self, address: str | None, timeout_s: float, say: Callable[[str], None]) -> None:
        self.address, self.timeout_s, self.say = address, timeout_s, say
        self.joined = address  # the address joined (the own cluster's, once started)
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile(prefix="ray-head-", suffix=".log")
        self.users = 0  # models using the connection
        self.connecting: anyio.Event | None = None  # set once the first model's join is over
        self.error: Exception | None = None  # why that join failed: the others fail the same way

    @property
    def own(self) -> bool:
        return self.proc is not None

    async def connect(self) -> None:
        try:
            if self.address is None:
                self._launch()  # on the loop's thread: see the module's docstring
            await anyio.to_thread.run_sync(self._join)
        except BaseException:  # cancelled or failed: what was started stops here
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.stop)
            raise

    def _launch(self) -> None:
        os.environ.update(_OWN_CLUSTER_ENV)  # before Ray is imported: it reads its token mode then
        # `ray start` makes no token: without one it stops at once. Named by path, so that the
        # cluster and this process read the very file that was checked.
        if (token := ensure_token(self.say)) is not None:
            os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
        port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",  # the run's own cluster: this machine alone
            f"--num-cpus={os.cpu_count() or 1}",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=child_env(_OWN_CLUSTER_ENV, keep=("RAY_",)),
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        self.joined = f"127.0.0.1:{port}"

    def _join(self) -> None:
        """Wait for the own cluster, if any, then join. Blocking."""
        if self.proc is not None:
            self._wait_started()
        import ray
        from ray.exceptions import AuthenticationError

        try:
            ray.init(
                address=self.joined,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level="ERROR",
                configure_logging=True,
            )
        except AuthenticationError as exc:
            self.stop()
            raise UserError(
                f"the Ray cluster at {self.joined} refused this process: {_last_line(str(exc))}",
                field="models[].server.address",
                fix=TOKEN_FIX,
            ) from None
        except (ConnectionError, RuntimeError, ValueError) as exc:
            self.stop()
            raise UserError(
                f"cannot join the Ray cluster at {self.joined}: {exc}",
                field="models[].server.address",
                fix="start the cluster first (ray start --head on one node, ray start "
                "--address=HEAD:PORT on the others), or remove address to run a "
                "cluster of this machine alone; a cluster with token "
                "authentication also refuses a wrong token this way (Ray's log "
                "then says InvalidAuthToken): set RAY_AUTH_MODE=token and give "
                "this process the cluster's token (RAY_AUTH_TOKEN, or "
                "~/.ray/auth_token)",
            ) from None

    def _wait_started(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if STARTED in self._printed():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        printed, exited = self._printed(), self.proc.poll() is not None
        self.stop()
        raise start_failure(printed, self.timeout_s, exited=exited)

    def _printed(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        """Leave the cluster, and stop it if it is the run's own. Blocking."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        stop_process(self.proc, 30)  # `ray start --block` stops its processes on SIGTERM
        self.log.close()  # closing twice (a failed join stops, then connect does) is harmless


def start_failure(printed: str, timeout_s: float, *, exited: bool) -> UserError:
    """Why the run's own cluster did not start, from what `ray start` printed."""
    if "AuthenticationError" in printed or "no authentication token" in printed:
        return UserError(
            "the Ray cluster for this run refused to start, for want of a token: "
            f"{_last_line(printed)}",
            field="models[].server",
            fix=TOKEN_FIX,
        )
    tail = "\n      ".join(printed.strip().splitlines()[-8:])
    if exited:
        return UserError(
            f"the Ray cluster for this run stopped while starting:\n      {tail}",
            field="models[].server.backend",
            fix="mend what Ray says above, or start a cluster yourself (ray start "
            '--head) and set address = "auto"',
        )
    return UserError(
        f"the Ray cluster for this run did not start within {timeout_s:g} s:\n      {tail}",
        field="models[].server.startup_timeout_s",
        fix="raise startup_timeout_s, or start a cluster yourself (ray start "
        '--head) and set address = "auto"',
    )


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


_shared: Head | None = None


async def join(address: str | None, timeout_s: float, say: Callable[[str], None]) -> Head:
    """This process's connection to the cluster at `address` (started if None), made by the
    first model that asks and shared by the others."""
    global _shared
    while _shared is not None and _shared.connecting is not None:  # another model is joining
        first = _shared
        await first.connecting.wait()
        if first.error is not None:
            raise first.error
    if _shared is None:
        head = _shared = Head(address, timeout_s, say)
        head.connecting = anyio.Event()
        try:
            await head.connect()
        except BaseException as exc:
            head.error = exc if isinstance(exc, Exception) else None
            _shared = None
            raise
        finally:
            head.connecting.set()
            head.connecting = None
    _shared.users += 1
    return _shared


async def leave(head: Head) -> None:
    """One model is done with the cluster; the last one leaves it (and stops the own one)."""
    global _shared
    head.users -= 1
    if head.users <= 0:
        if _shared is head:
            _shared = None
        await anyio.to_thread.run_sync(head.stop)

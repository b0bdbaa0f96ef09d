"""Replicas of the local model on a real Ray cluster started on this machine: a campaign on two
SmolLM2 replicas finishes with every task once; a replica killed mid-run is restarted by Ray and
loses and duplicates nothing; at the end, on Ctrl-C and on kill -9 of the engine, every replica
and server stops, as the processes and Ray itself both say."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.plan import Plan
from orchestrator.session import load_campaign
from orchestrator.spec.localmodel import default_model_path
from tests.conftest import ROOT, write_config
from tests.listeners import listening, off_loopback
from tests.ray_cluster import (
    ENV,
    alive,
    descendants,
    replicas_under,
    servers_on,
    servers_under,
    start_cluster,
    stop_cluster,
    wait_until,
)

pytestmark = [
    pytest.mark.ray,
    pytest.mark.local_model,
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="Ray is not installed (the ray extra: pip install -e '.[ray]')",
    ),
    pytest.mark.skipif(default_model_path() is None, reason="the local model is not installed"),
]


@pytest.fixture(scope="module")
def cluster():
    c = start_cluster(cpus=3)  # two replicas of one CPU each, and room for a restart
    yield c
    stop_cluster(c)


def config(
    tmp_path: Path,
    address: str | None,
    *,
    samples: int = 2,
    server: str = "",
    replicas: int = 2,
    more: str = "",
) -> Path:
    where = f'address = "{address}"' if address else ""
    return write_config(
        tmp_path,
        f"""
        name = "ray"
        jobs = ["paired"]
        samples = {samples}
        seed = 5
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "local"
        temperature = 0.7
        max_tokens = 32
        seed = 7
        structured_output = true
        [models.server]
        backend = "ray"
        replicas = {replicas}
        num_cpus = 1
        {where}
        {server}
        {more}
        [limits.local]
        max_in_flight = 4
        timeout_s = 60
        backoff_base_s = 0.2
        backoff_max_s = 2
        """,
    )


def start_run(path: Path, env: dict[str, str]) -> subprocess.Popen:
    # Every run here is a process of its own: it is the Ray driver (ray.init joins the whole
    # process to one cluster, with the token settings Ray reads from the environment when it is
    # imported, so this test process would stay joined to the first test's cluster), and the
    # tests kill it and check that Ray ends the replicas of a driver that is gone.
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def results(tmp_path: Path) -> list[dict]:
    path = tmp_path / "runs" / "ray" / "default" / "results.ndjson"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def task_ids(path: Path) -> set[str]:
    return {t.task_id for t in Plan(load_campaign(path)).tasks()}


def assert_every_task_once(tmp_path: Path, path: Path) -> list[dict]:
    """Each task of the plan has exactly one final record (ok, or an answer that did not parse:
    SmolLM2's own doing); none failed."""
    recs = results(tmp_path)
    final = Counter(r["taskId"] for r in recs if r["status"] != "failed")
    assert set(final) == task_ids(path), "a task was lost"
    assert max(final.values()) == 1, "a task was answered twice"
    return recs


def assert_all_stopped(cluster, tmp_path: Path) -> None:
    """No replica and no server left on the cluster's processes, no server anywhere on a port
    that answered the run, and no replica in Ray's view."""
    urls = {r["endpoint"] for r in results(tmp_path)}
    assert wait_until(
        lambda: (
            not replicas_under(cluster.proc.pid)
            and not servers_under(cluster.proc.pid)
            and not servers_on(urls)
        ),
        60,
    ), (descendants(cluster.proc.pid), servers_on(urls))
    view = cluster.settled()
    assert view["replicas"] == [] and view["free_cpus"] == cluster.cpus, view


def test_a_campaign_on_two_replicas_finishes_with_every_task_once(tmp_path, cluster):
    path = config(tmp_path, cluster.address)
    # a process of its own: the Ray driver (see start_run)
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=cluster.env,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    recs = assert_every_task_once(tmp_path, path)
    assert len(recs) == len(task_ids(path))  # no record but the one of each task
    served = Counter(r["endpoint"] for r in recs)
    assert len(served) == 2 and min(served.values()) >= 1, served  # both replicas answered
    assert "2 replica(s) on the Ray cluster" in run.stdout
    assert_all_stopped(cluster, tmp_path)


def test_two_models_on_ray_share_the_cluster(tmp_path, cluster):
    """One process joins Ray once: the second model's replicas go on the same connection."""
    second = f"""
        [[models]]
        provider = "local"
        temperature = 0.2
        max_tokens = 32
        structured_output = true
        [models.server]
        backend = "ray"
        replicas = 1
        num_cpus = 1
        address = "{cluster.address}"
        """
    path = config(tmp_path, cluster.address, samples=1, replicas=1, more=second)
    # a process of its own: the Ray driver (see start_run)
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=cluster.env,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    recs = assert_every_task_once(tmp_path, path)
    by_model = {r["modelKey"]: set() for r in recs}
    for r in recs:
        by_model[r["modelKey"]].add(r["endpoint"])
    assert len(by_model) == 2 and all(len(urls) == 1 for urls in by_model.values())
    assert len(set.union(*by_model.values())) == 2  # each model its own replica
    assert_all_stopped(cluster, tmp_path)


@pytest.mark.parametrize("victim", ["replica", "server"])
def test_a_replica_killed_mid_run_is_restarted_and_nothing_is_lost_or_doubled(
    tmp_path, cluster, victim
):
    """kill -9 of a replica's actor, or of its llama.cpp server alone (the actor then ends
    itself at its next address check): Ray restarts it, the run goes on."""
    path = config(tmp_path, cluster.address, samples=3)
    engine = start_run(path, cluster.env)
    try:
        first = wait_until(
            lambda: len(results(tmp_path)) >= 4 and replicas_under(cluster.proc.pid), 300
        )
        assert first, "the run made no progress"
        servers = servers_under(cluster.proc.pid)
        os.kill(first[0] if victim == "replica" else servers[0], signal.SIGKILL)
        restarted = wait_until(
            lambda: [p for p in replicas_under(cluster.proc.pid) if p not in first], 120
        )
        out, _ = engine.communicate(timeout=600)
    finally:
        engine.kill()
    assert engine.returncode == 0, out
    assert restarted, "Ray did not restart the replica"
    recs = assert_every_task_once(tmp_path, path)
    assert all(r["status"] in ("ok", "parse_error") for r in recs), Counter(
        r["status"] for r in recs
    )
    assert "replaced by" in out  # the pool follows the replica to its new address
    assert_all_stopped(cluster, tmp_path)


def test_kill_9_of_the_engine_leaves_no_replica_and_the_run_resumes(tmp_path, cluster):
    path = config(tmp_path, cluster.address)
    engine = start_run(path, cluster.env)
    assert wait_until(lambda: len(results(tmp_path)) >= 2, 300), "the run made no progress"
    servers = servers_under(cluster.proc.pid)
    assert len(servers) == 2
    assert servers_on({r["endpoint"] for r in results(tmp_path)})  # which sees them while they run
    engine.kill()
    engine.wait()
    assert_all_stopped(
        cluster, tmp_path
    )  # Ray ends the actors of a driver that is gone, their servers too
    assert not alive(servers)
    # a process of its own: the Ray driver (see start_run)
    resumed = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=cluster.env,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_every_task_once(tmp_path, path)
    assert_all_stopped(cluster, tmp_path)


def test_ctrl_c_stops_every_replica_and_server(tmp_path, cluster):
    path = config(tmp_path, cluster.address, samples=4)
    engine = start_run(path, cluster.env)
    assert wait_until(lambda: len(results(tmp_path)) >= 1, 300), "the run made no progress"
    engine.send_signal(signal.SIGINT)
    out, _ = engine.communicate(timeout=120)
    assert engine.returncode == 130, out
    assert_all_stopped(cluster, tmp_path)


def test_ctrl_c_while_the_replicas_load_stops_them(tmp_path, cluster):
    path = config(tmp_path, cluster.address)
    engine = start_run(path, cluster.env)
    assert wait_until(lambda: replicas_under(cluster.proc.pid), 120), "no replica was placed"
    assert not results(tmp_path)  # still loading
    engine.send_signal(signal.SIGINT)
    out, _ = engine.communicate(timeout=120)
    assert engine.returncode == 130, out
    assert_all_stopped(cluster, tmp_path)


def test_without_an_address_the_run_starts_its_own_cluster_and_leaves_nothing(tmp_path):
    path = config(tmp_path, None, samples=1)
    env = {k: v for k, v in os.environ.items() if k not in ENV and not k.startswith("RAY_")}
    env["HOME"] = str(home := tmp_path / "home")  # a machine that never ran Ray: no token yet
    engine = start_run(path, env)
    try:
        head = wait_until(
            lambda: [
                p
                for p, cmd in descendants(engine.pid).items()
                if "ray.scripts.scripts start --head" in cmd
            ],
            120,
        )
        assert head, "no Ray cluster was started"
        ray_processes = wait_until(lambda: servers_under(head[0]) and descendants(head[0]), 300)
        # The run's own cluster and its replicas' servers listen on loopback alone, and the
        # servers' key reaches them by environment, not argv (issue 31, item 2).
        open_now = listening(set(ray_processes) | set(head) | {engine.pid})
        servers = servers_under(head[0])
        argvs = [Path(f"/proc/{p}/cmdline").read_bytes() for p in servers]
        environs = [Path(f"/proc/{p}/environ").read_bytes().split(b"\0") for p in servers]
        out, _ = engine.communicate(timeout=600)
    finally:
        engine.kill()
    assert engine.returncode == 0, out
    assert open_now and not off_loopback(open_now), open_now
    keys = [e[len(b"API_KEY=") :] for env in environs for e in env if e.startswith(b"API_KEY=")]
    assert len(keys) == len(servers) and all(len(k) >= 24 for k in keys)
    assert not any(k in argv for k in keys for argv in argvs)
    assert "this machine's own Ray cluster" in out
    token = home / ".ray" / "auth_token"  # made where Ray looks, for this user alone, said once
    assert len(token.read_text()) == 64 and token.stat().st_mode & 0o777 == 0o600
    assert " ".join(out.split()).count(f"one was created in {token}") == 1, out
    assert_every_task_once(tmp_path, path)
    assert ray_processes and wait_until(lambda: not alive(list(ray_processes) + head), 60), {
        p: ray_processes.get(p, "head") for p in alive(list(ray_processes) + head)
    }


def test_kill_9_of_the_engine_stops_its_own_cluster(tmp_path):
    path = config(tmp_path, None, samples=2)
    engine = start_run(path, {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    head = wait_until(
        lambda: [
            p
            for p, cmd in descendants(engine.pid).items()
            if "ray.scripts.scripts start --head" in cmd
        ],
        120,
    )
    assert head, "no Ray cluster was started"
    assert wait_until(lambda: len(results(tmp_path)) >= 1, 300), "the run made no progress"
    everything = {**descendants(engine.pid)}
    assert servers_under(head[0])
    engine.kill()
    engine.wait()
    assert wait_until(lambda: not alive(everything), 90), {
        p: everything[p] for p in alive(everything)
    }


def test_replicas_the_cluster_cannot_place_are_a_clear_error(tmp_path, cluster):
    path = config(tmp_path, cluster.address, server="num_gpus = 1\nstartup_timeout_s = 5")
    # a process of its own: the Ray driver (see start_run)
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=cluster.env,
        timeout=300,
    )
    out = " ".join((run.stdout + run.stderr).split())  # the terminal's line breaks aside
    assert run.returncode == 2, out
    assert "did not all start within 5 s" in out and "num_gpus = 1" in out and "fix:" in out
    assert_all_stopped(cluster, tmp_path)


def test_a_cluster_joined_without_its_token_is_an_error_about_the_token(tmp_path, cluster):
    path = config(tmp_path, cluster.address)
    env = {k: v for k, v in cluster.env.items() if not k.startswith("RAY_AUTH_TOKEN")}
    env["HOME"] = str(home := tmp_path / "home")  # token mode on, and no token here
    # a process of its own: the Ray driver (see start_run)
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 2, out
    assert "refused this process" in out and "no authentication token" in out, out
    assert "RAY_AUTH_TOKEN" in out.split("fix:")[1] and "startup_timeout_s" not in out, out
    assert not (home / ".ray").exists()  # a joined cluster's token is its own: none is made
    assert_all_stopped(cluster, tmp_path)

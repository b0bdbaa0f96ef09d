"""What children of this tool inherit: an allow-list, so an inherited HOST cannot open the local
model to the network, PORT cannot move it, and no provider key reaches a process that does not
need it (issue 31, item 1)."""

from __future__ import annotations

import os
import subprocess
import sys

import aiohttp
import anyio
import pytest

from orchestrator.processes import child_env
from orchestrator.spec.localmodel import default_model_path
from orchestrator.spec.server import LocalServerConfig
from tests.listeners import listening, off_loopback


def test_the_allow_list_keeps_what_programs_need_and_nothing_else():
    ours = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "OPENBLAS_CORETYPE": "Haswell",
        "HOST": "0.0.0.0",
        "PORT": "18799",
        "CONFIG_FILE": "/tmp/evil.json",
        "OPENAI_API_KEY": "sk-secret",
        "ANTHROPIC_API_KEY": "sk-ant-secret",
        "RAY_AUTH_TOKEN_PATH": "/t",
    }
    env = child_env(source=ours)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "OPENBLAS_CORETYPE": "Haswell",
    }
    ray = child_env({"RAY_AUTH_MODE": "token"}, keep=("RAY_",), source=ours)
    assert ray["RAY_AUTH_TOKEN_PATH"] == "/t" and ray["RAY_AUTH_MODE"] == "token"
    assert "OPENAI_API_KEY" not in ray and "HOST" not in ray


def test_the_on_change_hook_gets_the_allow_list_and_what_it_is_given(tmp_path, monkeypatch):
    from orchestrator.nightly.comparing import run_hook

    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-travel")
    monkeypatch.setenv("SLACK_URL", "https://hooks.example/x")
    out = tmp_path / "env.txt"
    run_hook(
        f'{sys.executable} -c \'import os,sys; open(sys.argv[1] + ".env", "w").write(repr(dict(os.environ)))\'',
        out,
        ("SLACK_URL",),
    )
    seen = eval((tmp_path / "env.txt.env").read_text())  # noqa: S307 - our own repr
    assert seen["ORCHESTRATOR_COMPARE_JSON"] == str(out)
    assert seen["SLACK_URL"] == "https://hooks.example/x"
    assert "OPENAI_API_KEY" not in seen


@pytest.mark.local_model
@pytest.mark.skipif(
    default_model_path() is None or not default_model_path().exists(),
    reason="the [local] extra is not installed (make test installs it)",
)
def test_an_inherited_host_and_port_do_not_move_the_local_model(monkeypatch):
    from orchestrator.serving.llama import LlamaServer

    monkeypatch.setenv("HOST", "0.0.0.0")
    monkeypatch.setenv("PORT", "18799")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-travel")
    server = LlamaServer(LocalServerConfig(model_path=str(default_model_path()), n_ctx=512), 1)
    server.spawn()
    try:

        async def ready() -> None:
            async with aiohttp.ClientSession() as session:
                await server.wait_ready(session)

        anyio.run(ready)
        assert server.proc is not None
        pids = {server.proc.pid}
        found = listening(pids)
        assert found == {("127.0.0.1", server.port)}, found
        assert not off_loopback(found)
        environ = open(f"/proc/{server.proc.pid}/environ", "rb").read().split(b"\0")
        assert not any(e.startswith((b"HOST=", b"PORT=", b"OPENAI_API_KEY=")) for e in environ)
    finally:
        server.stop()
    done = subprocess.run(["true"], env=child_env())
    assert done.returncode == 0 and os.environ["HOST"] == "0.0.0.0"  # ours is left as it was


@pytest.mark.local_model
@pytest.mark.skipif(
    default_model_path() is None or not default_model_path().exists(),
    reason="the [local] extra is not installed (make test installs it)",
)
def test_the_local_server_answers_its_own_run_only():
    import urllib.error
    import urllib.request

    from orchestrator.serving.llama import LlamaServer

    key = "run-key-abcdefghijklmnop"
    server = LlamaServer(
        LocalServerConfig(model_path=str(default_model_path()), n_ctx=512), 1, key=key
    )
    server.spawn()
    try:

        async def ready() -> None:
            async with aiohttp.ClientSession() as session:
                await server.wait_ready(session)

        anyio.run(ready)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.url + "/models", timeout=30)
        assert refused.value.code == 401
        request = urllib.request.Request(server.url + "/models", headers=server.auth)
        assert urllib.request.urlopen(request, timeout=30).status == 200
        assert server.proc is not None
        argv = open(f"/proc/{server.proc.pid}/cmdline", "rb").read()
        assert key.encode() not in argv  # by environment: argv is every user's to read
    finally:
        server.stop()

"""One llama.cpp server process (llama-cpp-python's OpenAI-compatible server) on a free port: the
local provider starts one per slot (providers/local.py), a Ray replica one per replica
(cluster/replica.py). A leaf of the serving layer: it imports no provider."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

import aiohttp
import anyio

from orchestrator.errors import UserError
from orchestrator.processes import child_env, die_with_parent, free_port, stop_process
from orchestrator.spec.server import LocalServerConfig


class LocalServerError(UserError):
    """The local server could not be started."""


class LlamaServer:
    """One llama.cpp server process."""

    def __init__(
        self,
        config: LocalServerConfig,
        threads: int,
        host: str = "127.0.0.1",
        gpu: bool = False,
        key: str | None = None,
    ) -> None:
        self.config, self.threads, self.host, self.gpu = config, threads, host, gpu
        # The server's own key, given by environment (API_KEY), never on its command line,
        # which every user of the machine can read: only this run's clients may call it.
        self.key = key
        self.port = 0
        self.proc: subprocess.Popen | None = None
        # An unnamed file (unlinked at once): the server writes its log there, we read it back
        # if it fails to start, and nothing is left on disk on any exit, kill -9 included.
        self.log = tempfile.TemporaryFile(prefix="llama-server-", suffix=".log")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def spawn(self) -> None:
        self.port = free_port(self.host)
        cfg = self.config
        # With log-probabilities on, the server that reads them fast enough (llama_serve.py).
        server = "orchestrator.serving.llama_serve" if cfg.logits_all else "llama_cpp.server"
        cmd = [
            sys.executable,
            "-m",
            server,
            "--model",
            str(cfg.model_path),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(cfg.n_ctx),
            "--n_threads",
            str(self.threads),
            "--verbose",
            "false",
        ]
        if cfg.logits_all:
            cmd += ["--logits_all", "true"]
        if self.gpu:  # a replica given a GPU by Ray puts every layer there
            cmd += ["--n_gpu_layers", "-1"]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            # the server reads HOST, PORT and CONFIG_FILE ahead of its arguments: none reach it
            env=child_env({"API_KEY": self.key} if self.key else None),
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def log_tail(self, lines: int = 8) -> str:
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").strip().splitlines()
        return "\n      ".join(text[-lines:]) or "(the server printed nothing)"

    async def wait_ready(self, session: aiohttp.ClientSession) -> None:
        assert self.proc is not None, "spawn() first"
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalServerError(
                    f"the llama.cpp server for {self.config.model_path} exited with code "
                    f"{self.proc.returncode} while starting:\n      {self.log_tail()}",
                    field="models[].server",
                    fix="check that model_path is a valid GGUF model "
                    "(reinstall it if it is corrupt) and that n_ctx fits in memory",
                )
            try:
                async with session.get(self.url + "/models", headers=self.auth) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await anyio.sleep(0.1)
        raise LocalServerError(
            f"the llama.cpp server did not answer on {self.host}:{self.port} within "
            f"{self.config.startup_timeout_s:g} s; it printed:\n      {self.log_tail()}",
            field="models[].server.startup_timeout_s",
            fix="raise startup_timeout_s (a large model loads slowly on a busy machine)",
        )

    def stop(self) -> None:
        stop_process(self.proc, 10)
        self.log.close()


def score_prefix(model_path: str) -> str:
    """What a scored prompt must start with for llama-cpp-python to echo its log-probabilities
    in the right places. Its echo pairs the i-th token with the logits after the i-th prompt
    token, which is right only when the prompt starts with a start-of-text token it drops (as
    it does when the model adds one itself); for a model that adds none (SmolLM2), every echoed
    value would belong to the next token. Sending the token's text first puts one there, and
    llama.cpp's offsets do not count it. tests/test_local_scoring.py checks the values against
    the model's own logits."""
    import llama_cpp  # the local extra; only the local provider gets here

    vocab = llama_cpp.Llama(model_path, vocab_only=True, verbose=False)
    bos = vocab.token_bos()
    if bos < 0:
        raise UserError(
            f"the model {model_path} has no start-of-text token, which scoring with "
            "llama-cpp-python needs to read prompt log-probabilities right",
            field="models[].answers",
            fix='use answers = "generate" for this model',
        )
    if vocab.tokenize(b"a", add_bos=True)[:1] == [bos]:  # the model adds its own
        return ""
    return vocab.detokenize([bos], special=True).decode("utf-8", "replace")

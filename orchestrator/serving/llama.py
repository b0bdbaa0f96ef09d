"""One llama.cpp server process (llama-cpp-python's OpenAI-compatible server) on a free port: the
local provider starts one per slot (providers/local.py), a Ray replica one per replica
(cluster/replica.py). A leaf of the serving layer: it imports no provider."""

from __future__ import annotations

import signal
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


# Signals of a crash inside the server's own code: with llama.cpp, a build that does not suit
# this CPU (AMX kernels that segfault, an instruction set the CPU lacks).
_BUILD_SIGNALS = {signal.SIGSEGV, signal.SIGILL, signal.SIGBUS}
REBUILD = (
    "this llama.cpp build crashes on this CPU; rebuild it for any x86-64 CPU: "
    "python -m orchestrator.serving.llama_build (in a checkout: make llama), "
    "then run again to resume (docs/local-model.md, 'If the local server crashes')"
)


def exit_cause(returncode: int) -> str:
    """How a process ended, in words: 'was killed by SIGSEGV (signal 11)', 'exited with code 1'."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "an unknown signal"
    return f"was killed by {name} (signal {-returncode})"


def _portable_build() -> bool:
    """The installed llama.cpp was built with neither AVX-512 nor AMX (the portable build)."""
    try:
        import llama_cpp.llama_cpp as bindings

        info = bindings.llama_print_system_info()
    except Exception:  # noqa: BLE001 - not installed or not loadable: say nothing of it
        return False
    return b"AVX2 = 1" in info and b"AVX512" not in info and b"AMX" not in info


def exit_fix(returncode: int) -> str:
    """What to do about a server that ended so."""
    if -returncode in _BUILD_SIGNALS:
        if _portable_build():
            return (
                "the installed llama.cpp is already the portable build (AVX2, no AVX-512, no "
                'AMX): report it with the output of lscpu and of python -c "import llama_cpp; '
                'print(llama_cpp.llama_print_system_info())" (docs/local-model.md)'
            )
        return REBUILD
    if returncode in (-signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP):
        return "something stopped it from outside (a signal): run again to resume"
    if returncode == -signal.SIGKILL:
        return (
            "something killed it from outside, most often the kernel when memory runs out: "
            "lower n_ctx or slots, or free memory, then run again to resume"
        )
    return (
        "read the server's last lines above; check that model_path is a valid GGUF model "
        "(reinstall it if it is corrupt) and that n_ctx fits in memory"
    )


# llama-cpp-python's server, kept off AMX kernels that crash and fast at log-probabilities.
SERVER_MODULE = "orchestrator.serving.llama_serve"


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
        cmd = [
            sys.executable,
            "-m",
            SERVER_MODULE,
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

    def ended(self) -> int | None:
        """The server's exit status once it has ended (negative: the signal that killed it)."""
        return None if self.proc is None else self.proc.poll()

    def crash(self, when: str) -> tuple[str, str]:
        """(message, fix) for a server that has ended: how it ended, when, and its last words."""
        code = self.ended()
        assert code is not None, "the server is still running"
        return (
            f"the llama.cpp server for {self.config.model_path} {exit_cause(code)} {when}; "
            f"its last lines:\n      {self.log_tail()}",
            exit_fix(code),
        )

    async def _ended_within(self, seconds: float) -> int | None:
        """Its exit status if it ends within `seconds` (a dropped connection comes first)."""
        deadline = time.monotonic() + seconds
        while self.ended() is None and time.monotonic() < deadline:
            await anyio.sleep(0.02)
        return self.ended()

    async def wait_ready(self, session: aiohttp.ClientSession) -> None:
        assert self.proc is not None, "spawn() first"
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            if self.ended() is not None:
                message, fix = self.crash("while starting")
                raise LocalServerError(message, field="models[].server", fix=fix)
            try:
                async with session.get(self.url + "/models", headers=self.auth) as resp:
                    if resp.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await anyio.sleep(0.1)
        raise LocalServerError(
            f"the llama.cpp server did not answer on {self.host}:{self.port} within "
            f"{self.config.startup_timeout_s:g} s; it printed:\n      {self.log_tail()}",
            field="models[].server.startup_timeout_s",
            fix="raise startup_timeout_s (a large model loads slowly on a busy machine)",
        )

    async def smoke(self, session: aiohttp.ClientSession) -> None:
        """One completion of one token: a build that crashes on inference is found here, before
        the first task, not by the run. The prompt is some 40 tokens long, as real prompts are:
        llama.cpp evaluates a prompt of one token by other kernels (AMX's tile kernels run only
        for batches of several tokens)."""
        prompt = "Answer with one word. Which of these is a colour: a table, a river, red, a dog?"
        body = {"prompt": prompt * 2, "max_tokens": 1, "temperature": 0.0}
        timeout = aiohttp.ClientTimeout(total=self.config.startup_timeout_s)
        try:
            async with session.post(
                self.url + "/completions", json=body, headers=self.auth, timeout=timeout
            ) as resp:
                status, text = resp.status, (await resp.content.read(2000)).decode(errors="replace")
        except (aiohttp.ClientError, TimeoutError) as exc:
            if await self._ended_within(5.0) is not None:
                message, fix = self.crash("on a first test completion of one token")
                raise LocalServerError(message, field="models[].server", fix=fix) from None
            raise LocalServerError(
                f"the llama.cpp server for {self.config.model_path} did not answer a test "
                f"completion of one token ({type(exc).__name__}: {exc}); it printed:\n"
                f"      {self.log_tail()}",
                field="models[].server.startup_timeout_s",
                fix="raise startup_timeout_s if the machine is busy; else read its lines above",
            ) from None
        if status != 200:
            raise LocalServerError(
                f"the llama.cpp server for {self.config.model_path} answered a test completion "
                f"of one token with HTTP {status}: {text.strip()[:300]}",
                field="models[].server",
                fix="read the server's answer above; check model_path and n_ctx",
            )

    async def start(self, session: aiohttp.ClientSession) -> None:
        """Spawn it, wait until it answers, and check that it completes one token."""
        self.spawn()
        await self.wait_ready(session)
        await self.smoke(session)

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

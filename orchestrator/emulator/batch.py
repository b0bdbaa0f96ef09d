"""The emulator's batch jobs: what the three providers' batch APIs keep and do, whatever their
wire (batch_routes.py speaks that).

A job's requests are spooled to a file in the emulator's own temporary folder as they arrive and
its results written there, one a line: a 100,000-request batch is never one object in memory.
Nothing happens until the job's processing time is over; the first look at it after that
answers every item with the same logic as the online route (Emulator.gate and answer), then
the job has ended. Items are drawn to fail or expire per item, from the job's own random
stream, so a job answers the same way whenever it is looked at.
"""

from __future__ import annotations

import random
import secrets
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from orchestrator.emulator.batch_http import hex_id
from orchestrator.emulator.protocols import Anthropic, Gemini, OpenAI, echoed

if TYPE_CHECKING:
    from orchestrator.emulator.server import Emulator


DAY_S = 24 * 3600.0
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."


@dataclass
class BatchBehaviour:
    """How the emulated batch APIs behave."""

    processing_s: float = 0.0  # from creation until the job ends
    item_errors: float = 0.0  # share of items answered with a server error (500), drawn per item
    expire: float = 0.0  # share of items that expire unprocessed (Gemini: then the whole job
    #                      expires, with no results, as its API does)
    # Route name -> seconds to wait after doing the work and before answering, so that a test can
    # kill a client between the two. Routes: upload, file, content (OpenAI files), create, poll,
    # list, results, cancel.
    reply_delay_s: dict[str, float] = field(default_factory=dict)
    # Route name -> how many of its next answers are lost (the connection closes) after the work
    # is done: the client never hears that its batch was created.
    drop_replies: dict[str, int] = field(default_factory=dict)
    # OpenAI's queue of enqueued tokens, counted here in batches: a batch created while this
    # many of the key's are in progress fails with `token_limit_exceeded`, as OpenAI's does.
    queue_limit: int | None = None
    # A gateway in front of the batch APIs that takes at most this many bytes a request: a
    # larger one gets its 413 page, whatever the API's own limits.
    body_cap: int | None = None


@dataclass
class Job:
    protocol: str  # openai, anthropic, gemini
    id: str
    credential: str
    count: int
    input: Path  # one orjson [custom_id, request body] a line
    created: float
    deadline: float
    name: str = ""  # OpenAI: metadata's bias_orchestrator; Gemini: displayName
    extra: dict[str, Any] = field(default_factory=dict)  # what the protocol echoes back
    ended_at: float | None = None
    cancelled_at: float | None = None
    expired: bool = False  # Gemini: the whole job expired
    counts: Counter = field(default_factory=Counter)  # succeeded, errored, expired, canceled
    output: Path | None = None  # results, one a line (OpenAI: the output file's lines)
    errors: Path | None = None  # OpenAI: the error file's lines
    failed: list[dict[str, Any]] | None = None  # OpenAI: why validation failed
    views_after_end: int = 0  # OpenAI shows `finalizing` once

    @property
    def ended(self) -> bool:
        return self.ended_at is not None


class Jobs:
    """Every batch job and uploaded file of one emulator, newest last."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self.jobs: dict[str, Job] = {}
        self.files: dict[str, dict[str, Any]] = {}  # OpenAI file id -> its object (+ "_path")
        self._dir: Path | None = None
        self._protos = {"openai": OpenAI(), "anthropic": Anthropic(), "gemini": Gemini()}

    @property
    def behaviour(self) -> BatchBehaviour:
        return self.emulator.config.batch

    def path(self, name: str) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="emulator-batch-"))
        return self._dir / name

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # --- creation ------------------------------------------------------------------------------
    def create(
        self,
        protocol: str,
        job_id: str,
        credential: str,
        items: Path,
        count: int,
        name: str = "",
        **extra: Any,
    ) -> Job:
        now = time.time()
        job = Job(
            protocol,
            job_id,
            credential,
            count,
            items,
            now,
            now + self.behaviour.processing_s,
            name,
            extra,
        )
        self.jobs[job_id] = job
        log = self.emulator.log
        log.batches[protocol] += 1
        with open(items, "rb") as f:
            for line in f:
                log.batch_submitted[orjson.loads(line)[0]] += 1
        return job

    def failed(
        self,
        protocol: str,
        job_id: str,
        credential: str,
        errors: list[dict[str, Any]],
        **extra: Any,
    ) -> Job:
        """An OpenAI batch whose input did not validate: it ends at once, `failed`."""
        now = time.time()
        job = Job(
            protocol,
            job_id,
            credential,
            0,
            Path(),
            now,
            now,
            extra=extra,
            ended_at=now,
            failed=errors,
        )
        self.jobs[job_id] = job
        return job

    def listed(self, protocol: str, credential: str) -> list[Job]:
        """The credential's jobs of one protocol, newest first, each brought up to date."""
        jobs = [
            j
            for j in reversed(self.jobs.values())
            if j.protocol == protocol and j.credential == credential
        ]
        for job in jobs:
            self.settle(job)
        return jobs

    def get(self, protocol: str, job_id: str, credential: str) -> Job | None:
        job = self.jobs.get(job_id)
        if job is None or job.protocol != protocol or job.credential != credential:
            return None
        self.settle(job)
        return job

    # --- what happens to a job -----------------------------------------------------------------
    def settle(self, job: Job) -> None:
        """Process the job if its time has come (once: a job's items are answered only once)."""
        if job.ended or time.time() < job.deadline:
            return
        # Seeded by the job's place among the emulator's jobs, not its (random) id: the same
        # draws on every run.
        b, rng = (
            self.behaviour,
            random.Random(f"{self.emulator.config.seed}/{list(self.jobs).index(job.id)}"),
        )
        if (
            job.protocol == "gemini"
            and b.expire > 0
            and any(rng.random() < b.expire for _ in range(job.count))
        ):
            job.expired, job.ended_at = True, time.time()
            return
        expire = b.expire if job.protocol != "gemini" else 0.0
        job.output = self.path(f"{secrets.token_hex(8)}.out")
        if job.protocol == "openai":
            job.errors = self.path(f"{secrets.token_hex(8)}.err")
        proto, write = self._protos[job.protocol], WRITERS[job.protocol]
        out = open(job.output, "wb")
        err = open(job.errors, "wb") if job.errors else out
        try:
            with open(job.input, "rb") as src:
                for line in src:
                    custom_id, body = orjson.loads(line)
                    roll = rng.random()
                    if roll < expire:
                        job.counts["expired"] += 1
                        err.write(write.expired(custom_id) + b"\n")
                        continue
                    self.emulator.log.batch_items[custom_id] += 1
                    if roll < expire + b.item_errors:
                        status, reply = 500, proto.error(500, "internal error")
                    else:
                        status, reply = self._answer(proto, job, body)
                    if status != 200 and self.emulator.config.echo_key and job.credential:
                        reply = echoed(reply, job.credential)
                    job.counts["succeeded" if status == 200 else "errored"] += 1
                    (out if status == 200 else err).write(
                        write.answered(custom_id, status, reply) + b"\n"
                    )
        finally:
            out.close()
            if err is not out:
                err.close()
        job.ended_at = time.time()

    def _answer(self, proto: Any, job: Job, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            call = proto.read(body, job.credential, job.extra.get("model"))
        except (KeyError, TypeError, ValueError) as exc:
            return 400, proto.error(400, f"bad request: {exc}")
        call.betas = job.extra.get("betas", "")
        refused = self.emulator.gate(proto, call, body)
        return refused or (200, self.emulator.answer(proto, call, body)[0])

    def cancel(self, job: Job) -> None:
        """Cancel a job still in progress: none of its items is answered (Anthropic lists each as
        canceled)."""
        self.settle(job)
        if job.ended:
            return
        job.cancelled_at = job.ended_at = time.time()
        if job.protocol == "anthropic":
            job.output = self.path(f"{secrets.token_hex(8)}.out")
            with open(job.input, "rb") as src, open(job.output, "wb") as out:
                for line in src:
                    out.write(
                        orjson.dumps(
                            {"custom_id": orjson.loads(line)[0], "result": {"type": "canceled"}}
                        )
                        + b"\n"
                    )
            job.counts["canceled"] = job.count


class OpenAIWriter:
    """Output and error file lines, as OpenAI writes them: a non-200 answer goes to the error
    file with its status and body; an expired request with no response, error batch_expired."""

    @staticmethod
    def answered(custom_id: str, status: int, body: dict[str, Any]) -> bytes:
        return orjson.dumps(
            {
                "id": f"batch_req_{hex_id()}",
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": hex_id(32), "body": body},
                "error": None,
            }
        )

    @staticmethod
    def expired(custom_id: str) -> bytes:
        return orjson.dumps(
            {
                "id": f"batch_req_{hex_id()}",
                "custom_id": custom_id,
                "response": None,
                "error": {"code": "batch_expired", "message": EXPIRED_MESSAGE},
            }
        )


class AnthropicWriter:
    """Results lines: succeeded with the message, errored with the error response, expired."""

    @staticmethod
    def answered(custom_id: str, status: int, body: dict[str, Any]) -> bytes:
        result = (
            {"type": "succeeded", "message": body}
            if status == 200
            else {"type": "errored", "error": body}
        )
        return orjson.dumps({"custom_id": custom_id, "result": result})

    @staticmethod
    def expired(custom_id: str) -> bytes:
        return orjson.dumps({"custom_id": custom_id, "result": {"type": "expired"}})


# HTTP status -> google.rpc.Code, as an operation's Status carries it
GRPC_CODE = {400: 3, 401: 16, 403: 7, 404: 5, 429: 8, 500: 13, 503: 14, 504: 4}


class GeminiWriter:
    """Inlined responses: the response, or the error as a google.rpc.Status (gRPC code), with
    the request's metadata."""

    @staticmethod
    def answered(custom_id: str, status: int, body: dict[str, Any]) -> bytes:
        out = (
            {"response": body}
            if status == 200
            else {"error": {"code": GRPC_CODE.get(status, 2), "message": body["error"]["message"]}}
        )
        return orjson.dumps({**out, "metadata": {"key": custom_id}})

    @staticmethod
    def expired(custom_id: str) -> bytes:  # never called: a Gemini job expires whole
        raise AssertionError("a Gemini job expires whole")


WRITERS = {"openai": OpenAIWriter, "anthropic": AnthropicWriter, "gemini": GeminiWriter}

"""The three batch APIs on the emulator's port, in each provider's own shapes: OpenAI's files and
batches, Anthropic's message batches, Gemini's batch mode (inline requests). The jobs
themselves live in batch.py."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from orchestrator.emulator.batch import (
    DAY_S,
    Job,
    Jobs,
    Problem,
    answer,
    array_member,
    echoed,
    hex_id,
    read_capped,
    rfc3339,
)
from orchestrator.emulator.batch_gemini import GeminiRoutes
from orchestrator.emulator.protocols import Anthropic, Gemini, OpenAI, bearer, google_key

if TYPE_CHECKING:
    from orchestrator.emulator.server import Emulator

MB = 2**20
OPENAI_MAX = (50_000, 200 * MB)  # requests a batch, bytes a file
ANTHROPIC_MAX = (100_000, 256 * MB)
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")

Handler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


class BatchRoutes(GeminiRoutes):
    def __init__(self, emulator: Emulator) -> None:
        self.emulator, self.jobs = emulator, Jobs(emulator)
        self.openai, self.anthropic, self.gemini = OpenAI(), Anthropic(), Gemini()

    def add(self, app: web.Application) -> None:
        """Registered before the online routes: Gemini's batchGenerateContent shares their path."""
        r = app.router
        o, a, g = "openai", "anthropic", "gemini"
        r.add_post("/v1/files", self._route(o, "upload", self.upload))
        r.add_get("/v1/files/{id}", self._route(o, "file", self.file))
        r.add_get("/v1/files/{id}/content", self._route(o, "content", self.content))
        r.add_post("/v1/batches", self._route(o, "create", self.openai_create))
        r.add_get("/v1/batches", self._route(o, "list", self.openai_list))
        r.add_get("/v1/batches/{id}", self._route(o, "poll", self.openai_get))
        r.add_post("/v1/batches/{id}/cancel", self._route(o, "cancel", self.openai_cancel))
        r.add_post("/v1/messages/batches", self._route(a, "create", self.anthropic_create))
        r.add_get("/v1/messages/batches", self._route(a, "list", self.anthropic_list))
        r.add_get("/v1/messages/batches/{id}", self._route(a, "poll", self.anthropic_get))
        r.add_get(
            "/v1/messages/batches/{id}/results", self._route(a, "results", self.anthropic_results)
        )
        r.add_post(
            "/v1/messages/batches/{id}/cancel", self._route(a, "cancel", self.anthropic_cancel)
        )
        r.add_post(
            "/v1beta/models/{model}:batchGenerateContent",
            self._route(g, "create", self.gemini_create),
        )
        r.add_get("/v1beta/batches", self._route(g, "list", self.gemini_list))
        r.add_get("/v1beta/batches/{id}", self._route(g, "poll", self.gemini_get))
        r.add_post("/v1beta/batches/{id}:cancel", self._route(g, "cancel", self.gemini_cancel))

    def _route(self, protocol: str, name: str, handler: Handler):
        proto = getattr(self, protocol)

        async def route(request: web.Request) -> web.StreamResponse:
            credential = {
                "openai": bearer,
                "anthropic": lambda r: r.headers.get("x-api-key", ""),
                "gemini": google_key,
            }[protocol](request)
            keys = self.emulator.config.keys
            try:
                if keys is not None and credential not in keys:
                    raise Problem(401, "invalid api key")
                if protocol == "anthropic" and "anthropic-version" not in request.headers:
                    raise Problem(400, "bad request: missing anthropic-version header")
                response = await handler(request, credential)
            except Problem as p:
                body = proto.error(p.status, str(p))
                if p.kind and protocol == "anthropic":
                    body["error"]["type"] = p.kind
                if self.emulator.config.echo_key and credential:
                    body = echoed(body, credential)
                response = answer(body, p.status)
            self.emulator.log.batch_calls[(protocol, name, response.status)] += 1
            b = self.emulator.config.batch
            if delay := b.reply_delay_s.get(name):
                await asyncio.sleep(delay)
            if b.drop_replies.get(name, 0) > 0:  # the work is done; the answer is lost
                b.drop_replies[name] -= 1
                request.transport.close()
                return web.Response()
            return response

        return route

    def _job(self, protocol: str, job_id: str, credential: str) -> Job:
        job = self.jobs.get(protocol, job_id, credential)
        if job is None:
            raise Problem(404, f"No batch found with id '{job_id}'.")
        return job

    # --- OpenAI: files -------------------------------------------------------------------------
    async def upload(self, request: web.Request, credential: str) -> web.Response:
        reader = await request.multipart()
        purpose, file_id, size, filename = None, f"file-{hex_id()}", 0, "upload.jsonl"
        path = self.jobs.path(file_id)
        while (part := await reader.next()) is not None:
            if part.name == "purpose":
                purpose = (await part.text()).strip()
            elif part.name == "file":
                filename = part.filename or filename
                with open(path, "wb") as out:
                    while chunk := await part.read_chunk(1 << 20):
                        size += len(chunk)
                        if size > OPENAI_MAX[1]:
                            raise Problem(
                                400,
                                f"File exceeds the maximum size of {OPENAI_MAX[1] // MB} MB "
                                "for purpose 'batch'.",
                            )
                        out.write(chunk)
        if purpose is None or size == 0:
            raise Problem(400, "'file' and 'purpose' are required")
        self.jobs.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": size,
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "status_details": None,
            "expires_at": None,
            "_path": path,
            "_owner": credential,
        }
        self.emulator.log.uploads.append((file_id, size))
        return answer(self._file_object(file_id, credential))

    def _file_object(self, file_id: str, credential: str) -> dict[str, Any]:
        f = self.jobs.files.get(file_id)
        if f is None or f["_owner"] != credential:
            raise Problem(404, f"No such File object: {file_id}")
        return {k: v for k, v in f.items() if not k.startswith("_")}

    async def file(self, request: web.Request, credential: str) -> web.Response:
        return answer(self._file_object(request.match_info["id"], credential))

    async def content(self, request: web.Request, credential: str) -> web.StreamResponse:
        file_id = request.match_info["id"]
        self._file_object(file_id, credential)
        return web.FileResponse(
            self.jobs.files[file_id]["_path"], headers={"Content-Type": "application/octet-stream"}
        )

    def _output_file(self, job: Job, path: Path | None, purpose: str) -> str | None:
        if path is None or not path.exists() or path.stat().st_size == 0:
            return None
        file_id = f"file-{hex_id()}"
        self.jobs.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": path.stat().st_size,
            "created_at": int(time.time()),
            "filename": f"{job.id}_{purpose}.jsonl",
            "purpose": purpose,
            "status": "processed",
            "status_details": None,
            "expires_at": None,
            "_path": path,
            "_owner": job.credential,
        }
        return file_id

    # --- OpenAI: batches -----------------------------------------------------------------------
    async def openai_create(self, request: web.Request, credential: str) -> web.Response:
        body = orjson.loads(await request.read())
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if body.get("completion_window") != "24h":
            raise Problem(400, "completion_window must be '24h'")
        if endpoint not in ("/v1/chat/completions", "/v1/completions"):
            raise Problem(400, f"Unsupported endpoint {endpoint!r}")
        source = self.jobs.files.get(file_id or "")
        if source is None or source["_owner"] != credential:
            raise Problem(404, f"No such File object: {file_id}")
        metadata = body.get("metadata") or {}
        job_id, items = f"batch_{hex_id()}", self.jobs.path(f"{hex_id()}.in")
        errors, count = self._validate(source["_path"], endpoint, items)
        extra = {"endpoint": endpoint, "input_file_id": file_id, "metadata": metadata}
        if errors:
            items.unlink(missing_ok=True)
            job = self.jobs.failed("openai", job_id, credential, errors, **extra)
        else:
            job = self.jobs.create(
                "openai",
                job_id,
                credential,
                items,
                count,
                metadata.get("bias_orchestrator", ""),
                **extra,
            )
        return answer(self._openai_view(job, status="failed" if errors else "validating"))

    @staticmethod
    def _validate(source: Path, endpoint: str, items: Path) -> tuple[list[dict[str, Any]], int]:
        """The input file's lines as [custom_id, body], or OpenAI's validation errors."""
        seen: set[str] = set()
        errors: list[dict[str, Any]] = []

        def error(code: str, message: str, line: int | None) -> None:
            errors.append({"code": code, "message": message, "param": None, "line": line})

        with open(source, "rb") as src, open(items, "wb") as out:
            for n, raw in enumerate(src, 1):
                if not raw.strip():
                    continue
                try:
                    entry = orjson.loads(raw)
                    custom_id, body = entry["custom_id"], entry["body"]
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    error("invalid_json_line", "This line is not parseable as valid JSON.", n)
                    continue
                if entry.get("url") != endpoint or entry.get("method") != "POST":
                    error(
                        "mismatched_endpoint",
                        f"The url of this request does not match {endpoint}.",
                        n,
                    )
                if custom_id in seen:
                    error("duplicate_custom_id", f"The custom_id {custom_id!r} is not unique.", n)
                seen.add(custom_id)
                out.write(orjson.dumps([custom_id, body]) + b"\n")
                if len(errors) >= 10:
                    break
        if len(seen) > OPENAI_MAX[0]:
            error(
                "too_many_requests",
                f"A batch may hold at most {OPENAI_MAX[0]} requests; this file has {len(seen)}.",
                None,
            )
        if not seen and not errors:
            error("empty_file", "The input file holds no requests.", None)
        return errors, len(seen)

    def _openai_view(
        self, job: Job, status: str | None = None, advance: bool = True
    ) -> dict[str, Any]:
        """The Batch object. `finalizing` shows once, on the first look after the job ended."""
        if status is None:
            if job.failed is not None:
                status = "failed"
            elif job.cancelled_at is not None:
                status = "cancelled"
            elif not job.ended:
                status = "in_progress"
            elif job.views_after_end == 0:
                status = "finalizing"
                job.views_after_end += advance
            else:
                status = "expired" if job.counts["expired"] else "completed"
        if job.ended and job.failed is None and "output_file_id" not in job.extra:
            job.extra["output_file_id"] = self._output_file(job, job.output, "batch_output")
            job.extra["error_file_id"] = self._output_file(job, job.errors, "batch_output")
        final = status in ("completed", "expired", "cancelled", "failed")
        at = lambda t: int(t) if t is not None else None  # noqa: E731
        c = job.counts
        return {
            "id": job.id,
            "object": "batch",
            "endpoint": job.extra["endpoint"],
            "errors": {"object": "list", "data": job.failed} if job.failed else None,
            "input_file_id": job.extra["input_file_id"],
            "completion_window": "24h",
            "status": status,
            "output_file_id": job.extra.get("output_file_id") if final else None,
            "error_file_id": job.extra.get("error_file_id") if final else None,
            "created_at": at(job.created),
            "in_progress_at": at(job.created) if job.failed is None else None,
            "expires_at": at(job.created + DAY_S),
            "finalizing_at": at(job.ended_at)
            if job.ended and not job.failed and not job.cancelled_at
            else None,
            "completed_at": at(job.ended_at) if status == "completed" else None,
            "failed_at": at(job.ended_at) if status == "failed" else None,
            "expired_at": at(job.ended_at) if status == "expired" else None,
            "cancelling_at": at(job.cancelled_at),
            "cancelled_at": at(job.cancelled_at) if final else None,
            "request_counts": {
                "total": job.count,
                "completed": c["succeeded"],
                "failed": c["errored"],
            },
            "metadata": job.extra["metadata"],
        }

    async def openai_get(self, request: web.Request, credential: str) -> web.Response:
        return answer(self._openai_view(self._job("openai", request.match_info["id"], credential)))

    async def openai_list(self, request: web.Request, credential: str) -> web.Response:
        jobs = self.jobs.listed("openai", credential)
        limit = max(1, min(100, int(request.query.get("limit", 20))))
        if after := request.query.get("after"):
            ids = [j.id for j in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        page = [self._openai_view(j, advance=False) for j in jobs[:limit]]
        return answer(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(jobs) > limit,
            }
        )

    async def openai_cancel(self, request: web.Request, credential: str) -> web.Response:
        job = self._job("openai", request.match_info["id"], credential)
        was_running = not job.ended
        self.jobs.cancel(job)
        return answer(self._openai_view(job, status="cancelling" if was_running else None))

    # --- Anthropic -----------------------------------------------------------------------------
    async def anthropic_create(self, request: web.Request, credential: str) -> web.Response:
        text = (await read_capped(request, ANTHROPIC_MAX[1])).decode()
        job_id, items, seen = f"msgbatch_{hex_id()}", self.jobs.path(f"{hex_id()}.in"), set()
        try:
            with open(items, "wb") as out:
                for n, entry in enumerate(array_member(text, "requests")):
                    custom_id, params = entry["custom_id"], entry["params"]
                    if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
                        raise Problem(
                            400,
                            f"requests.{n}.custom_id: String should match pattern "
                            "'^[a-zA-Z0-9_-]{1,64}$'",
                        )
                    if custom_id in seen:
                        raise Problem(
                            400, f"requests.{n}.custom_id: duplicate custom_id {custom_id!r}"
                        )
                    if n >= ANTHROPIC_MAX[0]:
                        raise Problem(
                            400, f"requests: a batch may hold at most {ANTHROPIC_MAX[0]} requests"
                        )
                    self.anthropic.read(params, credential)
                    seen.add(custom_id)
                    out.write(orjson.dumps([custom_id, params]) + b"\n")
            if not seen:
                raise Problem(400, "requests: List should have at least 1 item")
        except (ValueError, KeyError, TypeError) as exc:
            items.unlink(missing_ok=True)
            raise Problem(400, f"bad request: {exc}") from None
        except Problem:
            items.unlink(missing_ok=True)
            raise
        del text
        return answer(
            self._anthropic_view(
                self.jobs.create("anthropic", job_id, credential, items, len(seen)), request
            )
        )

    def _anthropic_view(
        self, job: Job, request: web.Request, canceling: bool = False
    ) -> dict[str, Any]:
        c = job.counts
        url = f"{request.scheme}://{request.host}/v1/messages/batches/{job.id}/results"
        return {
            "id": job.id,
            "type": "message_batch",
            "processing_status": "canceling"
            if canceling
            else ("ended" if job.ended else "in_progress"),
            "request_counts": {
                "processing": 0 if job.ended else job.count,
                "succeeded": c["succeeded"],
                "errored": c["errored"],
                "canceled": c["canceled"],
                "expired": c["expired"],
            },
            "ended_at": rfc3339(job.ended_at),
            "created_at": rfc3339(job.created),
            "expires_at": rfc3339(job.created + DAY_S),
            "archived_at": None,
            "cancel_initiated_at": rfc3339(job.cancelled_at),
            "results_url": url if job.ended and not canceling else None,
        }

    async def anthropic_get(self, request: web.Request, credential: str) -> web.Response:
        return answer(
            self._anthropic_view(
                self._job("anthropic", request.match_info["id"], credential), request
            )
        )

    async def anthropic_results(self, request: web.Request, credential: str) -> web.StreamResponse:
        job = self._job("anthropic", request.match_info["id"], credential)
        if not job.ended or job.output is None:
            raise Problem(404, f"Batch '{job.id}' has not ended: it has no results yet.")
        return web.FileResponse(job.output, headers={"Content-Type": "application/binary"})

    async def anthropic_list(self, request: web.Request, credential: str) -> web.Response:
        jobs, q = self.jobs.listed("anthropic", credential), request.query
        limit = max(1, min(1000, int(q.get("limit", 20))))
        ids = [j.id for j in jobs]
        if (after := q.get("after_id")) is not None:
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
            more, jobs = len(jobs) > limit, jobs[:limit]
        elif (before := q.get("before_id")) is not None:
            jobs = jobs[: ids.index(before)] if before in ids else []
            more, jobs = len(jobs) > limit, jobs[-limit:]
        else:
            more, jobs = len(jobs) > limit, jobs[:limit]
        page = [self._anthropic_view(j, request) for j in jobs]
        return answer(
            {
                "data": page,
                "has_more": more,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
            }
        )

    async def anthropic_cancel(self, request: web.Request, credential: str) -> web.Response:
        job = self._job("anthropic", request.match_info["id"], credential)
        was_running = not job.ended
        self.jobs.cancel(job)
        return answer(self._anthropic_view(job, request, canceling=was_running))

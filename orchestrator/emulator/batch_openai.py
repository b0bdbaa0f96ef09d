"""OpenAI's batch API on the emulator: files uploaded (purpose `batch`) and read back, batches
made from an input file that is validated line by line as OpenAI does, and the output and error
files of a batch that has ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from orchestrator.emulator.batch import DAY_S, Job
from orchestrator.emulator.batch_http import MB, Problem, answer, hex_id

if TYPE_CHECKING:
    from orchestrator.emulator.batch import Jobs
    from orchestrator.emulator.server import Emulator

OPENAI_MAX = (50_000, 200 * MB)  # requests a batch, bytes a file


class OpenAIRoutes:
    """Mixed into BatchRoutes (which holds `emulator` and `jobs`, finds a job and registers the
    routes)."""

    emulator: Emulator
    jobs: Jobs
    _job: Callable[[str, str, str], Job]

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
        if not errors and self._queue_full(credential):
            errors = [
                {
                    "code": "token_limit_exceeded",
                    "message": "Enqueued token limit reached for the model in organization "
                    "org-emulator. Please try again once some in_progress batches have been "
                    "completed.",
                    "param": None,
                    "line": None,
                }
            ]
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

    def _queue_full(self, credential: str) -> bool:
        limit = self.jobs.behaviour.queue_limit
        if limit is None:
            return False
        now = time.time()
        queued = [
            j
            for j in self.jobs.jobs.values()
            if j.protocol == "openai"
            and j.credential == credential
            and j.failed is None
            and j.cancelled_at is None
            and not j.ended
            and now < j.deadline
        ]
        return len(queued) >= limit

    async def delete_file(self, request: web.Request, credential: str) -> web.Response:
        file_id = request.match_info["id"]
        found = self.jobs.files.get(file_id)
        if found is None or found["_owner"] != credential:
            raise Problem(404, f"No such File object: {file_id}")
        del self.jobs.files[file_id]
        self.emulator.log.deleted_files.append(file_id)
        return answer({"id": file_id, "object": "file", "deleted": True})

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

"""Gemini's batch mode on the emulator: inline requests to models/{model}:batchGenerateContent,
a long-running operation under batches/ that holds the responses once it has succeeded."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from orchestrator.emulator.batch import Job
from orchestrator.emulator.batch_http import Problem, answer, hex_id, read_capped, rfc3339

GEMINI_INLINE_BYTES = 20 * 2**20
GEMINI_BATCH = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
GEMINI_OUTPUT = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput"


class GeminiRoutes:
    """Mixed into BatchRoutes (which holds `jobs`, `gemini` and registers the routes)."""

    # --- Gemini --------------------------------------------------------------------------------
    async def gemini_create(self, request: web.Request, credential: str) -> web.Response:
        raw = await read_capped(request, GEMINI_INLINE_BYTES)
        model = request.match_info["model"]
        job_id, items, count = hex_id(16), self.jobs.path(f"{hex_id()}.in"), 0
        try:
            batch = orjson.loads(raw)["batch"]
            config = batch.get("input_config") or batch.get("inputConfig")
            name = batch.get("display_name") or batch.get("displayName") or ""
            with open(items, "wb") as out:
                for n, entry in enumerate(config["requests"]["requests"]):
                    key = str((entry.get("metadata") or {}).get("key", n))
                    self.gemini.read(entry["request"], credential, model)
                    out.write(orjson.dumps([key, entry["request"]]) + b"\n")
                    count += 1
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            items.unlink(missing_ok=True)
            raise Problem(400, f"Invalid JSON payload: {exc}") from None
        if not count:
            raise Problem(400, "batch.input_config.requests.requests must not be empty")
        job = self.jobs.create("gemini", job_id, credential, items, count, name, model=model)
        return answer(self._gemini_operation(job, state="BATCH_STATE_PENDING"))

    def _gemini_operation(
        self, job: Job, state: str | None = None, with_output: bool = False
    ) -> bytes:
        """The long-running operation of the job; once it has succeeded and `with_output`, with
        its inlined responses (read from the results file, as the list leaves them out)."""
        if state is None:
            state = (
                "BATCH_STATE_RUNNING"
                if not job.ended
                else "BATCH_STATE_CANCELLED"
                if job.cancelled_at
                else "BATCH_STATE_EXPIRED"
                if job.expired
                else "BATCH_STATE_SUCCEEDED"
            )
        c = job.counts
        stats = {
            "requestCount": str(job.count),
            "pendingRequestCount": str(0 if job.ended else job.count),
        }
        if job.ended:
            stats |= {
                "successfulRequestCount": str(c["succeeded"]),
                "failedRequestCount": str(c["errored"]),
            }
        name = f"batches/{job.id}"
        meta = {
            "@type": GEMINI_BATCH,
            "model": f"models/{job.extra['model']}",
            "displayName": job.name,
            "createTime": rfc3339(job.created),
            "updateTime": rfc3339(job.ended_at or job.created),
            "batchStats": stats,
            "state": state,
            "name": name,
        }
        if job.ended:
            meta["endTime"] = rfc3339(job.ended_at)
        op: dict[str, Any] = {"name": name, "metadata": meta}
        if job.ended:
            op["done"] = True
        if job.cancelled_at:
            op["error"] = {"code": 1, "message": "CANCELLED"}
        head = orjson.dumps(op)
        if not (with_output and state == "BATCH_STATE_SUCCEEDED" and job.output):
            return head
        with open(job.output, "rb") as f:
            lines = b",".join(line.rstrip(b"\n") for line in f)
        return (
            head[:-1]
            + b',"response":{"@type":"'
            + GEMINI_OUTPUT.encode()
            + b'","inlinedResponses":{"inlinedResponses":['
            + lines
            + b"]}}}"
        )

    async def gemini_get(self, request: web.Request, credential: str) -> web.Response:
        job = self._job("gemini", request.match_info["id"], credential)
        return answer(self._gemini_operation(job, with_output=True))

    async def gemini_list(self, request: web.Request, credential: str) -> web.Response:
        jobs, q = self.jobs.listed("gemini", credential), request.query
        size = max(1, min(1000, int(q.get("pageSize", 50))))
        start = int(q.get("pageToken") or 0)
        page = b",".join(self._gemini_operation(j) for j in jobs[start : start + size])
        token = b',"nextPageToken":"%d"' % (start + size) if start + size < len(jobs) else b""
        return answer(b'{"operations":[' + page + b"]" + token + b"}")

    async def gemini_cancel(self, request: web.Request, credential: str) -> web.Response:
        self.jobs.cancel(self._job("gemini", request.match_info["id"], credential))
        return answer({})

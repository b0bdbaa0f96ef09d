"""Anthropic's message batches on the emulator: a batch of requests in one body (read as it
streams, under the size cap), its status, its results file and its cancellation."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from orchestrator.emulator.batch import DAY_S, Job
from orchestrator.emulator.batch_http import (
    MB,
    Problem,
    answer,
    array_member,
    hex_id,
    read_capped,
    rfc3339,
)

if TYPE_CHECKING:
    from orchestrator.emulator.batch import Jobs
    from orchestrator.emulator.protocols import Anthropic

ANTHROPIC_MAX = (100_000, 256 * MB)  # requests a batch, bytes a body
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class AnthropicRoutes:
    """Mixed into BatchRoutes (which holds `anthropic` and `jobs`, finds a job and registers the
    routes)."""

    anthropic: Anthropic
    jobs: Jobs
    _job: Callable[[str, str, str], Job]

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
        betas = request.headers.get("anthropic-beta", "")  # what each item is answered under
        job = self.jobs.create("anthropic", job_id, credential, items, len(seen), betas=betas)
        return answer(self._anthropic_view(job, request))

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

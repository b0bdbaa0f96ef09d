"""Gemini's batch mode with inline requests: models/{model}:batchGenerateContent, a long-running
operation under batches/, the responses inlined in it once it has succeeded."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import orjson

from orchestrator.batch.api import BatchLimits, Item, Progress, Submitted
from orchestrator.batch.wire import CLOCK_SKEW_S, MB, BatchClient, moment, timestamp
from orchestrator.plan import Task
from orchestrator.providers.gemini import GeminiProvider

ENDED = {
    "BATCH_STATE_SUCCEEDED",
    "BATCH_STATE_FAILED",
    "BATCH_STATE_CANCELLED",
    "BATCH_STATE_EXPIRED",
}
# google.rpc.Code of an item's error -> the HTTP status the online call would have had
HTTP_STATUS = {3: 400, 16: 401, 7: 403, 5: 404, 8: 429, 13: 500, 14: 503, 4: 504, 2: 500}
COUNTS = {
    "requestCount": "total",
    "successfulRequestCount": "succeeded",
    "failedRequestCount": "failed",
    "pendingRequestCount": "pending",
}
MAX_LIST_PAGES = 50  # the list is in no stated order: it is read whole, up to this


class GeminiBatch(BatchClient):
    # Inline requests may total 20 MB; the envelope around the lines needs a little of it.
    # Gemini states no count: the bytes bind first.
    limits = BatchLimits(max_requests=100_000, max_bytes=20 * MB - 64 * 1024)
    turnaround = "within 24 hours (a batch still pending after 48 hours expires)"

    def __init__(self, provider: GeminiProvider) -> None:
        super().__init__(provider)
        self.base = provider.base_url + "/v1beta"

    def line(self, task: Task) -> bytes:
        return (
            b'{"request":'
            + self.provider.body(task)
            + b',"metadata":{"key":'
            + orjson.dumps(task.task_id)
            + b"}}"
        )

    async def submit(
        self,
        name: str,
        path: Path,
        count: int,
        on_uploaded: Callable[[str], None],
        known: frozenset[str] = frozenset(),
    ) -> Submitted:
        url = f"{self.base}/models/{quote(self.provider.model.name, safe='')}:batchGenerateContent"
        head = (
            b'{"batch":{"display_name":'
            + orjson.dumps(name)
            + b',"input_config":{"requests":{"requests":['
        )

        async def create() -> str:
            body = lambda: self.joined(path, head, b"]}}}}")  # noqa: E731
            return (await self.json("POST", url, data=body, retry=False))["name"]

        return Submitted(await self.create_once(create, name, count, known))

    async def find(
        self, name: str, since: datetime, count: int, exclude: frozenset[str] = frozenset()
    ) -> list[str]:
        """By display name, over the list of batches."""
        edge, token = timestamp(since) - CLOCK_SKEW_S, None
        for _ in range(MAX_LIST_PAGES):
            page = await self.json(
                "GET",
                f"{self.base}/batches?pageSize=100"
                + (f"&pageToken={quote(token)}" if token else ""),
            )
            for op in page.get("operations") or []:
                meta = op.get("metadata") or {}
                created = moment(meta.get("createTime"))
                if (
                    meta.get("displayName") == name
                    and (created is None or created >= edge)
                    and op["name"] not in exclude
                ):
                    return [op["name"]]
            token = page.get("nextPageToken")
            if not token:
                return []
        return []

    async def _operation(self, batch_id: str) -> dict:
        return await self.json("GET", f"{self.base}/{batch_id}")

    async def poll(self, batch_id: str) -> Progress:
        op = await self._operation(batch_id)
        meta = op.get("metadata") or {}
        state = meta.get("state", "")
        counts = {
            ours: int(v)
            for theirs, ours in COUNTS.items()
            if str(v := (meta.get("batchStats") or {}).get(theirs, "")).isdigit()
        }
        error = (op.get("error") or {}).get("message") if state == "BATCH_STATE_FAILED" else None
        return Progress(
            state,
            bool(op.get("done")) or state in ENDED,
            counts,
            self.provider.scrub(error) if error else None,
        )

    async def items(self, batch_id: str) -> AsyncIterator[Item]:
        """The inlined responses of a batch that succeeded. One that expired, failed or was
        cancelled has none: the runner puts back every task of it that has no item. The
        operation comes as one JSON document (inline batches hold at most 20 MB of input)."""
        op = await self._operation(batch_id)
        output = ((op.get("response") or {}).get("inlinedResponses") or {}).get(
            "inlinedResponses"
        ) or []
        for entry in output:
            key = (entry.get("metadata") or {}).get("key")
            if not isinstance(key, str):
                continue  # no task to give it to: its task stays pending
            if "response" in entry:
                yield self.answered(key, 200, entry["response"])
            else:
                error = entry.get("error") or {}
                status = HTTP_STATUS.get(error.get("code"), 500)
                yield self.answered(key, status, {"error": error})

    async def cancel(self, batch_id: str) -> None:
        await self.json("POST", f"{self.base}/{batch_id}:cancel")

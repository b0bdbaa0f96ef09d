"""Anthropic's Message Batches API: every request in one body, results as JSONL at results_url
(succeeded, errored, canceled, expired)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import orjson

from orchestrator.batch.api import BatchLimits, Item, Progress, Submitted
from orchestrator.batch.wire import CLOCK_SKEW_S, MB, BatchClient, moment, timestamp
from orchestrator.plan import Task
from orchestrator.providers.anthropic import AnthropicProvider

# An errored item carries the error response but no status: the status the online call would
# have had, for the online classification.
STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicBatch(BatchClient):
    limits = BatchLimits(max_requests=100_000, max_bytes=256 * MB)
    names_batches = False  # find() goes by size and time: settle.py confirms by results
    turnaround = "within 24 hours (most within an hour)"

    def __init__(self, provider: AnthropicProvider) -> None:
        super().__init__(provider)
        self.base = provider.base_url + "/v1/messages/batches"

    def line(self, task: Task) -> bytes:
        return (
            b'{"custom_id":'
            + orjson.dumps(task.task_id)
            + b',"params":'
            + self.provider.body(task)
            + b"}"
        )

    async def submit(
        self,
        name: str,
        path: Path,
        count: int,
        on_uploaded: Callable[[str], None],
        known: frozenset[str] = frozenset(),
    ) -> Submitted:
        async def create() -> str:
            body = lambda: self.joined(path, b'{"requests":[', b"]}")  # noqa: E731
            return (await self.json("POST", self.base, data=body, retry=False))["id"]

        return Submitted(await self.create_once(create, name, count, known))

    async def find(
        self, name: str, since: datetime, count: int, exclude: frozenset[str] = frozenset()
    ) -> list[str]:
        """Anthropic keeps no name for a batch: every batch of `count` requests created at or
        after `since`, but those in `exclude` (the run's own, already known), is a candidate.
        Several may be (two models of one size submitted together): the runner then tells them
        apart by their results' custom ids once they have ended, and submits nothing again."""
        edge, after, found = timestamp(since) - CLOCK_SKEW_S, None, []
        while True:
            page = await self.json(
                "GET", f"{self.base}?limit=100" + (f"&after_id={after}" if after else "")
            )
            for batch in page.get("data") or []:
                created = moment(batch.get("created_at"))
                if created is not None and created < edge:
                    return found
                if (
                    sum((batch.get("request_counts") or {}).values()) == count
                    and batch["id"] not in exclude
                ):
                    found.append(batch["id"])
            if not page.get("has_more") or not page.get("data"):
                return found
            after = page.get("last_id") or page["data"][-1]["id"]

    async def _batch(self, batch_id: str) -> dict:
        return await self.json("GET", f"{self.base}/{batch_id}")

    async def poll(self, batch_id: str) -> Progress:
        batch = await self._batch(batch_id)
        status = batch.get("processing_status", "")
        return Progress(status, status == "ended", dict(batch.get("request_counts") or {}))

    async def items(self, batch_id: str) -> AsyncIterator[Item]:
        batch = await self._batch(batch_id)
        url = batch.get("results_url") or f"{self.base}/{batch_id}/results"
        async for line in self.lines(url):
            yield self._item(line)

    def _item(self, line: bytes) -> Item:
        try:
            entry = orjson.loads(line)
            custom_id, result = entry["custom_id"], entry["result"]
            kind = result["type"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise self.provider.malformed(line) from None
        if kind == "succeeded":
            return self.answered(custom_id, 200, result.get("message"))
        if kind == "errored":
            error = result.get("error") or {}
            status = STATUS.get((error.get("error") or {}).get("type"), 500)
            return self.answered(custom_id, status, error)
        return self.unanswered(custom_id, kind)  # canceled, expired

    async def cancel(self, batch_id: str) -> None:
        await self.json("POST", f"{self.base}/{batch_id}/cancel")

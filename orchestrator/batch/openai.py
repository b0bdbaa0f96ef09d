"""OpenAI's Batch API: the JSONL input uploaded to /v1/files, a batch created on it, results in
an output file (answered requests) and an error file (the others, and expired ones)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import aiohttp
import orjson

from orchestrator.batch.api import BatchLimits, Item, Progress, Submitted
from orchestrator.batch.wire import CLOCK_SKEW_S, MB, BatchClient, moment, timestamp
from orchestrator.plan import Task
from orchestrator.providers.openai import OpenAIProvider

ENDPOINT = "/v1/chat/completions"
ENDED = {"completed", "expired", "cancelled", "failed"}
NAME_KEY = "bias_orchestrator"  # the batch's metadata key that holds its name


class OpenAIBatch(BatchClient):
    limits = BatchLimits(max_requests=50_000, max_bytes=200 * MB)
    turnaround = "within 24 hours"

    def __init__(self, provider: OpenAIProvider) -> None:
        super().__init__(provider)
        self.base = provider.base_url  # .../v1

    def line(self, task: Task) -> bytes:
        return (
            b'{"custom_id":'
            + orjson.dumps(task.task_id)
            + b',"method":"POST","url":"'
            + ENDPOINT.encode()
            + b'","body":'
            + self.provider.body(task)
            + b"}"
        )

    def _form(self, path: Path, f) -> aiohttp.MultipartWriter:
        form = aiohttp.MultipartWriter("form-data")
        form.append("batch").set_content_disposition("form-data", name="purpose")
        form.append(f, {"Content-Type": "application/jsonl"}).set_content_disposition(
            "form-data", name="file", filename=path.name
        )
        return form

    async def _upload(self, path: Path) -> str:
        async def once() -> str:
            with open(path, "rb") as f:  # streamed from the file, opened anew for each attempt
                form = self._form(path, f)
                answer = await self.json(
                    "POST",
                    f"{self.base}/files",
                    data=lambda: form,
                    headers={"Content-Type": form.content_type},
                    retry=False,
                )
            return answer["id"]

        return await self.retrying(once)

    async def submit(
        self,
        name: str,
        path: Path,
        count: int,
        on_uploaded: Callable[[str], None],
        known: frozenset[str] = frozenset(),
    ) -> Submitted:
        file_id = await self._upload(path)
        on_uploaded(file_id)

        async def create() -> str:
            batch = await self.json(
                "POST",
                f"{self.base}/batches",
                retry=False,
                body={
                    "input_file_id": file_id,
                    "endpoint": ENDPOINT,
                    "completion_window": "24h",
                    "metadata": {NAME_KEY: name},
                },
            )
            return batch["id"]

        return Submitted(await self.create_once(create, name, count, known), file_id)

    async def find(
        self, name: str, since: datetime, count: int, exclude: frozenset[str] = frozenset()
    ) -> list[str]:
        """By the name in the batch's metadata, over the batch list (newest first, so the walk
        stops at the first batch older than `since`)."""
        edge, after = timestamp(since) - CLOCK_SKEW_S, None
        while True:
            url = f"{self.base}/batches?limit=100" + (f"&after={after}" if after else "")
            page = await self.json("GET", url)
            for batch in page.get("data") or []:
                created = moment(batch.get("created_at"))
                if created is not None and created < edge:
                    return []
                if (batch.get("metadata") or {}).get(NAME_KEY) == name and batch[
                    "id"
                ] not in exclude:
                    return [batch["id"]]
            if not page.get("has_more") or not page.get("data"):
                return []
            after = page["data"][-1]["id"]

    async def _batch(self, batch_id: str) -> dict:
        return await self.json("GET", f"{self.base}/batches/{batch_id}")

    async def poll(self, batch_id: str) -> Progress:
        batch = await self._batch(batch_id)
        status = batch.get("status", "")
        errors = (batch.get("errors") or {}).get("data") or []
        error = (
            "; ".join(
                f"{e.get('code')}: {e.get('message')}"
                + (f" (line {e['line']})" if e.get("line") else "")
                for e in errors
            )
            or None
        )
        return Progress(
            status,
            status in ENDED,
            dict(batch.get("request_counts") or {}),
            self.provider.scrub(error) if error else None,
        )

    async def items(self, batch_id: str) -> AsyncIterator[Item]:
        """The output file's answers, then the error file's failed and expired requests."""
        batch = await self._batch(batch_id)
        for file_id in (batch.get("output_file_id"), batch.get("error_file_id")):
            if not file_id:
                continue
            async for line in self.lines(f"{self.base}/files/{file_id}/content"):
                yield self._item(line)

    def _item(self, line: bytes) -> Item:
        try:
            entry = orjson.loads(line)
            custom_id = entry["custom_id"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise self.provider.malformed(line) from None
        response, error = entry.get("response"), entry.get("error")
        if response:
            return self.answered(
                custom_id, int(response.get("status_code") or 0), response.get("body")
            )
        code = (error or {}).get("code") or "no response"
        what = "expired" if code == "batch_expired" else f"not processed ({code})"
        return self.unanswered(custom_id, f"{what}: {(error or {}).get('message', '')}")

    async def forget_input(self, file_id: str | None) -> bool:
        if not file_id:  # the prompts it holds stay at OpenAI until it is deleted
            return True

        async def once() -> bool:
            status, headers, payload = await self.provider.send(
                "DELETE", f"{self.base}/files/{file_id}", None, None
            )
            if status not in (200, 404):
                raise self.provider.error(status, headers, payload)
            return status == 200  # 404: gone already, or not this key's (see inputs.py)

        return await self.retrying(once)

    async def cancel(self, batch_id: str) -> None:
        await self.json("POST", f"{self.base}/batches/{batch_id}/cancel")

"""An optional extractor model: when an answer's JSON cannot be found, a second model is asked to
state the answer the first one gave, in the task's JSON contract. Its use is recorded per result
(`extractedBy`), and the original raw text is always kept."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.engine.caller import Helper
from orchestrator.engine.calls import safe_parse
from orchestrator.parse import Parsed
from orchestrator.plan import Task
from orchestrator.spec.models import ResponseContract

SYSTEM = "You extract answers from text. Return only the requested JSON object."


def answer_format(contract: ResponseContract) -> str:
    if contract.kind == "choice":
        return '{"%s": "<one of: %s>"}' % (contract.field, " | ".join(contract.options))
    if contract.kind == "rating":
        return '{"%s": <integer %d-%d>}' % (contract.field, contract.minimum, contract.maximum)
    if contract.kind == "judgment":
        return '{"score": <integer>, "verdict": "<%s>", "reason": "<text>"}' % "|".join(
            contract.options
        )
    return '{"%s": <number>}' % contract.field


class Extractor(Helper):
    def messages(self, task: Task, raw: str) -> tuple[dict[str, str], ...]:
        question = task.cell.messages[-1]["content"]
        user = (
            f"A model was given this task:\n\n{question}\n\nIt answered:\n\n{raw}\n\n"
            "State the final answer it gave, exactly as it gave it (do not answer the task "
            "yourself; if it gave none, say null), as JSON only: "
            + answer_format(task.cell.contract)
        )
        return ({"role": "system", "content": SYSTEM}, {"role": "user", "content": user})

    async def extract(
        self, task: Task, raw: str, on_retry: Callable[[], None]
    ) -> tuple[Parsed, float]:
        """The answer the extractor states, and what asking it cost (USD; 0 without a price)."""
        completion, cost = await self.ask(task, self.messages(task, raw), on_retry)
        return safe_parse(completion.text, task), cost

"""The plan's side of the viewer: a record's cell (its rendered messages) and the cells whose
prompts hold a text. The plan is rebuilt once from the run's manifest (engine/run_folder.py)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from orchestrator.engine.records import head_order
from orchestrator.plan import Cell, Plan

# The fields of a record that name its cell; optionOrder is joined with "|" (null: not counterbalanced)
CELL_FIELDS = [
    "job",
    "experimentSlug",
    "conditionIndex",
    "variant",
    "strategy",
    "modelKey",
    "order",
]
_FIELD_SCHEMA = {
    "job": pl.String,
    "experimentSlug": pl.String,
    "conditionIndex": pl.Int64,
    "variant": pl.String,
    "strategy": pl.String,
    "modelKey": pl.String,
    "order": pl.String,
}


def cell_fields(cell: Cell) -> tuple[Any, ...]:
    order = head_order(cell)
    return (
        cell.job.id,
        cell.experiment.slug,
        cell.condition.index,
        cell.variant.id,
        cell.strategy.id,
        cell.model_key,
        "|".join(order) if order is not None else None,
    )


class Cells:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    @cached_property
    def plan(self) -> Plan:
        from orchestrator.engine.run_folder import campaign_of_run
        from orchestrator.studies import registered

        return Plan(campaign_of_run(self.run_dir, registered()))

    @cached_property
    def _by_fields(self) -> dict[tuple[Any, ...], list[Cell]]:
        found: dict[tuple[Any, ...], list[Cell]] = {}
        for cell in self.plan.cells:
            found.setdefault(cell_fields(cell), []).append(cell)
        return found

    @cached_property
    def _ids(self) -> dict[tuple[Any, ...], int]:
        """An id per set of cell fields (the `cell` column of the viewer's frame)."""
        return {fields: i for i, fields in enumerate(self._by_fields)}

    @cached_property
    def _texts(self) -> list[tuple[int, str]]:
        return [
            (self._ids[cell_fields(c)], "\n".join(m["content"] for m in c.messages).lower())
            for c in self.plan.cells
        ]

    def table(self) -> pl.DataFrame:
        """The cell fields and their id, to join onto records."""
        return pl.DataFrame(
            [(*fields, i) for fields, i in self._ids.items()],
            schema={**_FIELD_SCHEMA, "cell": pl.UInt32},
            orient="row",
        )

    def of(self, record: dict[str, Any]) -> Cell | None:
        """The cell a record was planned in, confirmed by its task id (the cells of one set of
        fields hold different samples, or differ in what the fields do not name)."""
        from orchestrator.plan import task_id

        order = record.get("optionOrder")
        key = (
            record.get("job"),
            record.get("experimentSlug"),
            record.get("conditionIndex"),
            record.get("variant"),
            record.get("strategy"),
            record.get("modelKey"),
            "|".join(order) if order else None,
        )
        sample = record.get("sample")
        for cell in self._by_fields.get(key, []):
            if isinstance(sample, int) and task_id(cell.key, sample) == record.get("taskId"):
                return cell
        return None

    def matching(self, text: str) -> list[int]:
        """The ids of the cells whose messages hold `text` (case-insensitive)."""
        needle = text.lower()
        return sorted({i for i, body in self._texts if needle in body})

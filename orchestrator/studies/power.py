"""`orchestrator power`'s figures: every registered study's planned tests, assessed.

Each study says what its test is over which units and with which variance (its own
`power.py`); analysis/power.py turns that into minimum detectable effects and, for a target
effect, the samples it needs. Here they get the calls and cost that follow, from the plan's
cells and estimate.py, so `power` and `plan` cannot disagree on a price.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from typing import Any

from orchestrator.analysis.power import Target, assess
from orchestrator.estimate import estimate
from orchestrator.studies import registered

FORMAT = "bias-orchestrator-power/1"


def power_rows(plan, pilot, target: Target) -> list[dict[str, Any]]:
    """One row per study test x model: its planned units and samples, level, MDE, the MDE
    unlimited samples would give, the smallest p it can give; with a target effect, the samples
    per cell it needs and their calls and cost."""
    calls: dict[tuple[str, str, str], int] = defaultdict(int)
    for cell in plan.cells:
        calls[cell.job.id, cell.experiment.slug, cell.model_key] += (
            cell.samples * cell.calls_per_task
        )
    prices = {
        key: (0.0 if e.free else e.cost / e.calls if e.cost is not None and e.calls else None)
        for key, e in estimate(plan).items()
    }
    labels = {m.key: m.label for m in plan.campaign.config.models}
    rows = []
    for study in registered():
        for planned in study.power(plan, pilot, target.alpha):
            row = {k: v for k, v in asdict(planned).items() if k not in ("design", "experiments")}
            row |= {"model_label": labels.get(planned.model, planned.model)}
            row |= assess(planned, target)
            needed = row.get("samples_needed")
            if target.mde is not None:
                slugs = planned.experiments or (planned.experiment,)
                planned_calls = sum(calls[planned.job, s, planned.model] for s in slugs)
                per_sample = planned_calls / max(planned.samples, 1)
                row["calls_needed"] = None if needed is None else round(per_sample * needed)
                price = prices.get(planned.model)
                row["cost_usd_needed"] = (
                    None if needed is None or price is None else per_sample * needed * price
                )
            rows.append({k: _plain(v) for k, v in row.items()})
    return rows


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers (JSON takes only those)."""
    return value.item() if hasattr(value, "item") and not isinstance(value, str) else value


def power_json(plan, pilot, target: Target) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "alpha": target.alpha,
        "power": target.power,
        "target_mde": target.mde,
        "pilot": None if pilot is None else str(pilot.path),
        "tests": power_rows(plan, pilot, target),
    }

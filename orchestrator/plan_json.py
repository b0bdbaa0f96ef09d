"""The plan in a machine-readable form (`orchestrator plan --json`): what the tables show, for
scripts and CI. Everything is read off the planned cells and estimate.py, so the JSON and the
tables cannot disagree."""

from __future__ import annotations

from typing import Any

from orchestrator.estimate import durations, estimate, total_cost
from orchestrator.plan import Plan, limit_note
from orchestrator.pricing import did_you_mean

FORMAT = "bias-orchestrator-plan/1"


def _jobs(plan: Plan) -> list[dict[str, Any]]:
    """Per job, experiment and condition: distinct items (prompt variants) and tasks, summed
    over strategies, option orders, samples and models."""
    tree: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for cell in plan.cells:
        cond = (
            tree.setdefault(cell.job.id, {})
            .setdefault(cell.experiment.slug, {})
            .setdefault(
                cell.condition.index,
                {
                    "index": cell.condition.index,
                    "label": cell.condition.label,
                    "items": set(),
                    "tasks": 0,
                    "answer": _answer(cell.variant.contract, cell.variant.contract_from),
                },
            )
        )
        cond["items"].add(cell.variant.id)
        cond["tasks"] += cell.samples
    jobs = []
    for job in plan.campaign.jobs:
        experiments = []
        for slug, conds in tree.get(job.id, {}).items():
            conditions = [{**c, "items": len(c["items"])} for c in conds.values()]
            experiments.append(
                {
                    "slug": slug,
                    "tasks": sum(c["tasks"] for c in conditions),
                    "conditions": conditions,
                }
            )
        note = limit_note(plan.campaign, job)
        jobs.append(
            {
                **({"limit": note} if note else {}),
                "id": job.id,
                "strategies": [s.id for s in plan.campaign.strategies_for(job)],
                "samples": {
                    m.key: plan.campaign.samples_for(job, m) for m in plan.campaign.config.models
                },
                "tasks": sum(e["tasks"] for e in experiments),
                "experiments": experiments,
            }
        )
    return jobs


def _answer(contract: Any, source: str) -> dict[str, Any]:
    """What an answer must be, as planned, and where that came from: a person checks a rating's
    scale here before paying."""
    shown: dict[str, Any] = {"kind": contract.kind, "field": contract.field}
    if source:
        shown["from"] = source
    if contract.kind in ("rating", "judgment"):
        shown |= {"minimum": contract.minimum, "maximum": contract.maximum}
    if contract.options:
        shown["options"] = list(contract.options)
    return shown


def contract_warnings(plan: Plan) -> list[str]:
    """Where a condition's wording states another rating scale than its contract (a declared
    1-10 on a prompt that says 1-7): the model reads the prompt, the parser the contract."""
    from orchestrator.wording import rating_scale

    said: dict[tuple[str, str, int], str] = {}
    for cell in plan.cells:
        contract = cell.variant.contract
        worded = (
            rating_scale(cell.variant.prompt) if contract.kind in ("rating", "judgment") else None
        )
        if worded and worded != (contract.minimum, contract.maximum):
            key = (cell.job.id, cell.experiment.slug, cell.condition.index)
            said.setdefault(
                key,
                f"job {key[0]}, experiment {key[1]}, condition '{cell.condition.label}': the "
                f"prompt states a {worded[0]}-{worded[1]} scale, the answer contract "
                f"{contract.minimum}-{contract.maximum}; answers outside the contract are "
                "parse errors",
            )
    return list(said.values())


def answer_text(contract: Any, source: str = "") -> str:
    """The answer contract in a few words, for `plan`'s table: `rating 1-10 (declared)`,
    `choice (3 options, from the prompt)`."""
    where = {"declared": "declared", "prompt": "from the prompt"}.get(source)
    if contract.kind in ("rating", "judgment"):
        text = f"{contract.kind} {contract.minimum}-{contract.maximum}"
        return f"{text} ({where})" if where else text
    if contract.options:
        count = f"{len(contract.options)} options"
        return f"{contract.kind} ({count}, {where})" if where else f"{contract.kind} ({count})"
    return f"{contract.kind} ({where})" if where else str(contract.kind)


def plan_json(plan: Plan) -> dict[str, Any]:
    estimates = estimate(plan)
    tasks = plan.per_model()
    models = [
        {
            "key": e.key,
            "label": e.label,
            "limit_key": e.limit_key,
            "tasks": tasks[e.key],
            "calls": e.calls,
            "input_tokens": e.input_tokens,
            "output_tokens": {"typical": e.output_typical, "max": e.output_max},
            "free": e.free,
            "cost_usd": {"typical": e.cost, "max": e.cost_max},
            "batch": e.batch,
            "turnaround": e.turnaround,
            "reasoning_tokens": {"per_call": e.reasoning_tokens, "basis": e.reasoning_basis},
        }
        for e in estimates.values()
    ]
    close = plan.campaign.close_prices
    warnings = [
        f"model {e.label} has no price (see configs/prices.toml): its cost is unknown"
        + (f"; {did_you_mean(close[key])}" if close.get(key) else "")
        for key, e in estimates.items()
        if e.price is None and not e.free
    ] + contract_warnings(plan)
    return {
        "format": FORMAT,
        "campaign": plan.campaign.config.name,
        "seed": plan.seed,
        "plan_hash": plan.fingerprint()["hash"],
        # where models, samples, items, output_dir and run_id came from: a flag, config, default
        "sources": plan.campaign.sources,
        "jobs": _jobs(plan),
        "models": models,
        "duration_s": durations(plan, estimates),  # per limit key; null: no rpm/tpm bounds it
        "total": {
            "tasks": plan.total,
            "calls": sum(e.calls for e in estimates.values()),
            "cost_usd": total_cost(estimates),
        },
        "warnings": warnings,
    }

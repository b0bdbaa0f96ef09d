"""Expansion of a campaign into tasks: lazy, with stable ids and a seeded interleaved order.

A *cell* is everything that defines a call except the sample index (job, experiment, condition,
variant, strategy, model, rendered messages); there are few of them. Tasks are (cell, sample)
pairs and there may be millions, so they are only ever produced one at a time, in the order of a
seeded permutation of the task index space.
"""
from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from orchestrator.spec.campaign import Campaign, ModelConfig
from orchestrator.spec.models import Condition, Experiment, Job, ResponseContract, Strategy, Variant
from orchestrator.spec.native import choice_block

_CHUNK = 65_536


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity
class Cell:
    job: Job
    experiment: Experiment
    condition: Condition
    variant: Variant
    strategy: Strategy
    model_index: int
    model: ModelConfig
    messages: tuple[dict[str, str], ...]
    samples: int
    key: bytes  # digest of everything above; task ids derive from it
    model_key: str  # the model identity's short id (results are grouped by it)
    est_tokens: int  # prompt estimate + max_tokens: what a call may count against a token limit
    order: tuple[int, ...] | None = None  # the order the options are shown in (counterbalanced)
    first_sample: int = 1  # this cell holds samples first_sample .. first_sample + samples - 1
    cacheable: bool = True  # providers may keep its request body (not for one-off extractor calls)

    @property
    def contract(self) -> ResponseContract:
        return self.variant.contract


@dataclass(frozen=True, slots=True)
class Task:
    task_id: str
    cell: Cell
    sample: int  # 1-based, as in the published result format


def option_orders(n: int) -> list[tuple[int, ...]]:
    """Every order of up to three options; a cyclic Latin square (each option once in each
    position) for more."""
    if n <= 3:
        return list(itertools.permutations(range(n)))
    return [tuple((i + k) % n for i in range(n)) for k in range(n)]


def render_messages(job: Job, experiment: Experiment, variant: Variant, strategy: Strategy,
                    order: tuple[int, ...] | None = None) -> tuple[dict[str, str], ...]:
    system = strategy.system_prompt if strategy.system_prompt is not None else job.system_prompt
    user = variant.prompt
    if order is not None:
        user += "\n\n" + choice_block(variant.contract, order)
    if strategy.user_suffix:
        bias = experiment.metric.label or experiment.bias_slug or experiment.slug
        user += "\n\n" + strategy.user_suffix.replace("{bias}", bias)
    messages = ({"role": "user", "content": user},)
    return ({"role": "system", "content": system}, *messages) if system else messages


def _presentations(variant: Variant, samples: int) -> list[tuple[tuple[int, ...] | None, int, int]]:
    """(option order, first sample, samples) blocks: samples spread evenly over the orders."""
    if not variant.present_options:
        return [(None, 1, samples)]
    orders = option_orders(len(variant.contract.options))
    base, extra = divmod(samples, len(orders))
    blocks, first = [], 1
    for i, order in enumerate(orders):
        count = base + (i < extra)
        if count:
            blocks.append((order, first, count))
            first += count
    return blocks


def _cell_key(job: Job, exp: Experiment, cond: Condition, variant: Variant, strategy: Strategy,
              model: ModelConfig, messages: tuple[dict[str, str], ...]) -> bytes:
    blob = orjson.dumps({"job": job.id, "experiment": exp.slug, "condition": cond.index,
                         "variant": variant.id, "strategy": strategy.id,
                         "model": model.identity(), "messages": messages,
                         "contract": variant.contract.model_dump()},
                        option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(blob, digest_size=16).digest()


def task_id(cell_key: bytes, sample: int) -> str:
    return hashlib.blake2b(cell_key + sample.to_bytes(4, "big"), digest_size=16).hexdigest()


def build_cells(campaign: Campaign) -> list[Cell]:
    cells = []
    for m_idx, model in enumerate(campaign.config.models):
        for job in campaign.jobs:
            samples = campaign.samples_for(job)
            for strategy in campaign.strategies_for(job):
                for exp in job.experiments:
                    for cond in exp.conditions:
                        for variant in cond.variants:
                            for order, first, count in _presentations(variant, samples):
                                msgs = render_messages(job, exp, variant, strategy, order)
                                key = _cell_key(job, exp, cond, variant, strategy, model, msgs)
                                est = sum(estimate_tokens(m["content"]) for m in msgs) + model.max_tokens
                                cells.append(Cell(job, exp, cond, variant, strategy, m_idx, model, msgs,
                                                  count, key, model.key, est, order, first))
    return cells


class Plan:
    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.seed = campaign.config.seed
        self.cells = build_cells(campaign)
        self.total = sum(c.samples for c in self.cells)

    def tasks(self, model_indices: Iterable[int] | None = None,
              skip: set[str] | frozenset[str] = frozenset()) -> Iterator[Task]:
        """Tasks of the given models (default all) in seeded shuffled order, minus `skip`."""
        wanted = None if model_indices is None else set(model_indices)
        cells = [c for c in self.cells if wanted is None or c.model_index in wanted]
        if not cells:
            return
        ends = np.cumsum([c.samples for c in cells])
        # sample = position within the cell + the cell's first sample number
        starts = ends - np.array([c.samples for c in cells]) - np.array([c.first_sample - 1 for c in cells])
        # Each model subset gets its own permutation, so a limit key's order does not depend on
        # which other keys exist; the seed is recorded in the manifest.
        salt = sorted(wanted) if wanted is not None else []
        order = np.random.default_rng([self.seed, len(salt), *salt]).permutation(int(ends[-1]))
        for lo in range(0, len(order), _CHUNK):
            chunk = order[lo:lo + _CHUNK]
            cell_idx = np.searchsorted(ends, chunk, side="right")
            samples = (chunk - starts[cell_idx] + 1).tolist()
            for ci, sample in zip(cell_idx.tolist(), samples, strict=True):
                cell = cells[ci]
                tid = task_id(cell.key, sample)
                if tid not in skip:
                    yield Task(tid, cell, sample)

    def per_model(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self.cells:
            counts[c.model_key] = counts.get(c.model_key, 0) + c.samples
        return counts

    def fingerprint(self) -> dict[str, Any]:
        """What the plan is, in a form whose differences a person can read."""
        cells = hashlib.blake2b(b"".join(sorted(c.key + c.samples.to_bytes(4, "big")
                                                for c in self.cells)), digest_size=16)
        return {"hash": cells.hexdigest(), "tasks": self.total, "seed": self.seed,
                "jobs": [j.id for j in self.campaign.jobs],
                "models": [m.identity() for m in self.campaign.config.models],
                "per_model": self.per_model(),
                "extractor": (self.campaign.config.extractor.identity()
                              if self.campaign.config.extractor else None),
                "samples": {j.id: self.campaign.samples_for(j) for j in self.campaign.jobs},
                "strategies": {j.id: [s.id for s in self.campaign.strategies_for(j)]
                               for j in self.campaign.jobs}}


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The fields of two fingerprints that differ, worded for an error message."""
    changes = []
    for key in ("jobs", "models", "samples", "strategies", "seed", "tasks", "extractor"):
        if old.get(key) != new.get(key):
            changes.append(f"{key}: was {old.get(key)!r}, now {new.get(key)!r}")
    if not changes and old.get("hash") != new.get("hash"):
        changes.append("prompts or response contracts of the jobs changed")
    return changes


def estimate_tokens(text: str) -> int:
    """A provider-neutral token estimate (about four characters a token)."""
    return max(1, (len(text) + 3) // 4)

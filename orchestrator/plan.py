"""Expansion of a campaign into tasks: lazy, with stable ids and a seeded interleaved order.

A *cell* is everything that defines a call except the sample index (job, experiment, condition,
variant, strategy, model, rendered messages: plan_prompts.py); there are few of them. Tasks are
(cell, sample) pairs and there may be millions, so they are only ever produced one at a time, in
the order of a seeded permutation of the task index space, computed per index (shuffle.py), so a
plan of any size the ids can number takes no memory to order.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from orchestrator.errors import UserError
from orchestrator.plan_prompts import candidates, render_messages, render_scoring
from orchestrator.shuffle import MAX_SIZE, Shuffle
from orchestrator.spec.campaign import Campaign, ModelConfig
from orchestrator.spec.checks import shot_pool
from orchestrator.spec.models import (
    Condition,
    Experiment,
    Job,
    ResponseContract,
    Shot,
    Strategy,
    Variant,
)

_CHUNK = 65_536
MAX_SAMPLES = (1 << 32) - 1  # a task id hashes its sample number as 4 bytes


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

    @property
    def scored(self) -> bool:
        """Whether its answers are chosen by option log-probabilities (DC-PMI), not written."""
        return self.model.answers == "score"

    @property
    def calls_per_task(self) -> int:
        """One call per option when scored (the premise's calls are shared by the whole run)."""
        return len(self.contract.options) if self.scored else 1

    @property
    def prompt_estimate(self) -> int:
        return self.est_tokens - answer_tokens(self.model, self.contract)


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


def sampled(
    campaign: Campaign, experiment: Experiment, condition: Condition
) -> tuple[Variant, ...]:
    """The condition's items, or a sample of the campaign's `items` of them, taken whole: an
    item in all its option orders (`item["group"]`, where a job says), so positions stay
    balanced, and in turn from each kind of item (`item["stratum"]`), so every score keeps
    items. Groups are taken in the order of a seeded hash of their id, so a group's place in
    the sample does not depend on the others and a larger sample keeps a smaller one's items."""
    limit, variants = campaign.config.items, condition.variants
    if limit is None or len(variants) <= limit:
        return variants

    def group(v: Variant) -> str:
        return str((v.item or {}).get("group", v.id))

    groups: dict[str, list[Variant]] = {}
    for v in variants:
        groups.setdefault(group(v), []).append(v)
    seed = f"{campaign.config.seed}:{experiment.slug}:{condition.index}:".encode()
    ranked = sorted(
        groups, key=lambda g: hashlib.blake2b(seed + g.encode(), digest_size=8).digest()
    )
    strata: dict[str, list[str]] = {}
    for g in ranked:
        strata.setdefault(str((groups[g][0].item or {}).get("stratum", "")), []).append(g)
    turns = itertools.chain.from_iterable(itertools.zip_longest(*strata.values()))
    keep: set[str] = set()
    count = 0
    for g in filter(None, turns):
        if count + len(groups[g]) > limit and keep:
            break
        keep.add(g)
        count += len(groups[g])
    return tuple(v for v in variants if group(v) in keep)


def pick_shots(campaign: Campaign, experiment: Experiment, variant: Variant) -> tuple[Shot, ...]:
    """The campaign's `shots` examples for one item: drawn from its experiment's pool, by a
    generator seeded with the campaign seed and the item, so an item keeps its examples."""
    config = campaign.config
    pool = shot_pool(experiment, config.shot_kind) if config.shots else ()
    if not pool:
        return ()
    rng = random.Random(f"{config.seed}:{experiment.slug}:{variant.id}")
    return tuple(rng.sample(pool, config.shots))


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


def _cell_key(
    job: Job,
    exp: Experiment,
    cond: Condition,
    variant: Variant,
    strategy: Strategy,
    identity: orjson.Fragment,
    messages: tuple[dict[str, str], ...],
) -> bytes:
    blob = orjson.dumps(
        {
            "job": job.id,
            "experiment": exp.slug,
            "condition": cond.index,
            "variant": variant.id,
            "strategy": strategy.id,
            "model": identity,
            "messages": messages,
            "contract": variant.contract.model_dump(),
        },
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.blake2b(blob, digest_size=16).digest()


def task_id(cell_key: bytes, sample: int) -> str:
    return hashlib.blake2b(cell_key + sample.to_bytes(4, "big"), digest_size=16).hexdigest()


def _items(
    campaign: Campaign, job: Job
) -> list[tuple[Experiment, Condition, Variant, tuple[Shot, ...]]]:
    """The job's items (a campaign's `items` sample of them), each with its few-shot examples:
    the same for every model and strategy, so drawn once."""
    return [
        (exp, cond, variant, pick_shots(campaign, exp, variant))
        for exp in limited_experiments(campaign, job)
        for cond in exp.conditions
        for variant in sampled(campaign, exp, cond)
    ]


def limited_experiments(campaign: Campaign, job: Job) -> tuple[Experiment, ...]:
    """The job's experiments under the campaign's `items` limit. A job whose every condition
    holds one item (the seed-000 format: an experiment is one item pair) has nothing to sample
    within a condition, so its limit takes that many experiments, in the order of a seeded hash
    of their slugs (a larger limit keeps a smaller one's), as --limit does in other tools."""
    limit, experiments = campaign.config.items, tuple(job.experiments)
    if limit is None or len(experiments) <= limit or not one_item_each(job):
        return experiments
    seed = f"{campaign.config.seed}:{job.id}:".encode()
    ranked = sorted(
        (e.slug for e in experiments),
        key=lambda slug: hashlib.blake2b(seed + slug.encode(), digest_size=8).digest(),
    )
    keep = set(ranked[:limit])
    return tuple(e for e in experiments if e.slug in keep)


def one_item_each(job: Job) -> bool:
    return all(len(c.variants) == 1 for e in job.experiments for c in e.conditions)


def limit_note(campaign: Campaign, job: Job) -> str | None:
    """How the `items` limit applies to the job, for `plan` (None without a limit)."""
    limit = campaign.config.items
    if limit is None:
        return None
    if one_item_each(job):
        kept = len(limited_experiments(campaign, job))
        return (
            f"job {job.id}: one item per condition, so the limit of {limit} takes {kept} of its "
            f"{len(job.experiments)} experiments (chosen by the seed)"
        )
    return f"job {job.id}: at most {limit} items per experiment x condition (chosen by the seed)"


def build_cells(campaign: Campaign) -> list[Cell]:
    cells = []
    items = {job.id: _items(campaign, job) for job in campaign.jobs}
    for m_idx, model in enumerate(campaign.config.models):
        render = render_scoring if model.answers == "score" else render_messages
        # Once per model, pre-encoded: a simulated model's identity holds its whole planting
        # table, which would otherwise be rebuilt and encoded for every cell.
        identity = orjson.Fragment(orjson.dumps(model.identity(), option=orjson.OPT_SORT_KEYS))
        model_key = model.key
        for job in campaign.jobs:
            samples = campaign.samples_for(job, model)
            for strategy in campaign.strategies_for(job):
                for exp, cond, variant, shots in items[job.id]:
                    for order, first, count in _presentations(variant, samples):
                        msgs = render(job, exp, variant, strategy, order, shots)
                        key = _cell_key(job, exp, cond, variant, strategy, identity, msgs)
                        est = sum(estimate_tokens(m["content"]) for m in msgs) + answer_tokens(
                            model, variant.contract
                        )
                        cells.append(
                            Cell(
                                job,
                                exp,
                                cond,
                                variant,
                                strategy,
                                m_idx,
                                model,
                                msgs,
                                count,
                                key,
                                model_key,
                                est,
                                order,
                                first,
                            )
                        )
    return cells


def answer_tokens(model: ModelConfig, contract: ResponseContract) -> int:
    """What a call may add to its prompt against a token limit: max_tokens of writing, or, for
    one scoring call, the longest option and the one token generated after it."""
    if model.answers == "score":
        return max(map(estimate_tokens, candidates(contract))) + 1
    return model.max_tokens


def _source(campaign: Campaign) -> str | None:
    return str(campaign.source) if campaign.source else None


def check_size(campaign: Campaign) -> None:
    """Refuse sample counts that task ids cannot number (before anything is built)."""
    for job in campaign.jobs:
        n = max(campaign.samples_for(job, m) for m in campaign.config.models)
        if n > MAX_SAMPLES:
            flag = campaign.flags.get("samples")  # given on the command line, not in the file
            raise UserError(
                f"{flag or 'samples ='} {n:,} is more than task ids can number (at most "
                f"{MAX_SAMPLES:,} per condition)",
                file=None if flag else _source(campaign),
                field=flag or "samples",
                fix=f"{'give' if flag else 'set'} {flag or 'samples'} at most {MAX_SAMPLES:,}",
            )


class Plan:
    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.seed = campaign.config.seed
        check_size(campaign)
        self.cells = build_cells(campaign)
        self.total = sum(c.samples for c in self.cells)
        if self.total > MAX_SIZE:
            raise UserError(
                f"the plan has {self.total:,} tasks, more than a run can order "
                f"(at most {MAX_SIZE:,})",
                file=_source(campaign),
                field="samples",
                fix="lower samples, or split the models or jobs over several runs",
            )

    def tasks(
        self,
        model_indices: Iterable[int] | None = None,
        skip: set[str] | frozenset[str] = frozenset(),
    ) -> Iterator[Task]:
        """Tasks of the given models (default all) in seeded shuffled order, minus `skip`."""
        wanted = None if model_indices is None else set(model_indices)
        cells = [c for c in self.cells if wanted is None or c.model_index in wanted]
        if not cells:
            return
        sizes = np.array([c.samples for c in cells], dtype=np.int64)
        ends = np.cumsum(sizes)
        # sample = position within the cell + the cell's first sample number
        starts = ends - sizes - np.array([c.first_sample - 1 for c in cells], dtype=np.int64)
        # Each model subset gets its own permutation, so a limit key's order does not depend on
        # which other keys exist; the seed is recorded in the manifest.
        salt = sorted(wanted) if wanted is not None else []
        shuffle = Shuffle(int(ends[-1]), orjson.dumps([self.seed, salt]))
        for lo in range(0, int(ends[-1]), _CHUNK):
            chunk = shuffle(np.arange(lo, min(lo + _CHUNK, int(ends[-1])), dtype=np.uint64))
            chunk = chunk.astype(np.int64)
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
        """What the plan is, in a form whose differences a person can read
        (plan_changes.describe_changes)."""
        from orchestrator.plan_changes import prompt_digests

        cells = hashlib.blake2b(
            b"".join(sorted(c.key + c.samples.to_bytes(4, "big") for c in self.cells)),
            digest_size=16,
        )
        return {
            "hash": cells.hexdigest(),
            "tasks": self.total,
            "seed": self.seed,
            "jobs": [j.id for j in self.campaign.jobs],
            "models": [m.identity() for m in self.campaign.config.models],
            "per_model": self.per_model(),
            "extractor": (
                self.campaign.config.extractor.identity()
                if self.campaign.config.extractor
                else None
            ),
            # only when set, so the fingerprints of runs without one stay as they were
            **(
                {"screener": self.campaign.config.screener.identity()}
                if self.campaign.config.screener
                else {}
            ),
            # per cell of a model that samples; samples_by_model has every model's
            "samples": {j.id: self.campaign.samples_for(j) for j in self.campaign.jobs},
            "samples_by_model": {
                m.key: {j.id: self.campaign.samples_for(j, m) for j in self.campaign.jobs}
                for m in self.campaign.config.models
            },
            "strategies": {
                j.id: [s.id for s in self.campaign.strategies_for(j)] for j in self.campaign.jobs
            },
            "prompts": {
                j.id: prompt_digests(j, self.campaign.strategies_for(j)) for j in self.campaign.jobs
            },
        }


def estimate_tokens(text: str) -> int:
    """A provider-neutral token estimate (about four characters a token)."""
    return max(1, (len(text) + 3) // 4)

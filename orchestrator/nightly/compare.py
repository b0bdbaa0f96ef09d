"""`orchestrator compare RUN_A RUN_B`: what changed from one run of a campaign to the next.

For every study, per effect both runs have: the change with a 95% CI and p, Benjamini-Hochberg
across the comparison (difference.py); per model the change in parse errors and refusals (tested)
and in latency and cost per call (shown); per model and experiment the served model strings and
system fingerprints. Each finding that deserves a person's attention is a flag (FLAGS); the
exit code says whether any flag of the kinds asked for (--fail-on) was raised, so cron and CI
can alert. Reads the two runs; writes only the comparison, beside the runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from orchestrator.nightly.difference import ALPHA, adjust, effect_changes, rate_changes
from orchestrator.nightly.effects import RunEffects
from orchestrator.nightly.flags import FLAGS
from orchestrator.plan_changes import describe_changes

SCHEMA = "bias-orchestrator-compare/1"


@dataclass
class Comparison:
    a: RunEffects
    b: RunEffects
    effects: pl.DataFrame
    rates: pl.DataFrame
    served: pl.DataFrame
    only_a: pl.DataFrame
    only_b: pl.DataFrame
    plan_changes: list[str]
    flags: list[dict[str, Any]] = field(default_factory=list)

    def counted(self, fail_on: set[str]) -> list[dict[str, Any]]:
        return [f for f in self.flags if f["flag"] in fail_on]


def _effect_flags(effects: pl.DataFrame) -> pl.DataFrame:
    """Every flag of an effect asks for its change to be significant (q < ALPHA): an effect
    just over the line one night and just under it the next is noise of the threshold, and
    flagging it would flag a borderline effect every other night. So, with the rates in the
    same Benjamini-Hochberg family, a comparison of two nights that differ by chance alone
    raises a flag with probability about ALPHA."""
    changed = (pl.col("q") < ALPHA).fill_null(False)
    sig_a, sig_b = (
        pl.col("significant_a").fill_null(False),
        pl.col("significant_b").fill_null(False),
    )
    opposite = pl.col("effect_a").sign() * pl.col("effect_b").sign() < 0
    # No test (no spread: a model at temperature 0, or every answer alike in both runs): any
    # change beyond rounding is one the model made, shown as such and never called significant.
    untested = pl.col("p_change").is_null() & (pl.col("change") != 0).fill_null(False)
    flip = (changed & sig_a & sig_b & opposite) | (untested & opposite.fill_null(False))
    named = [
        (changed, "effect_changed"),
        (flip, "sign_flip"),
        (changed & sig_b & ~sig_a, "newly_significant"),
        (changed & sig_a & ~sig_b, "vanished"),
        (untested, "untested_change"),
    ]
    return effects.with_columns(
        flags=pl.concat_list(
            pl.when(cond).then(pl.lit([name])).otherwise(pl.lit([], dtype=pl.List(pl.String)))
            for cond, name in named
        )
    )


def _served(a: RunEffects, b: RunEffects) -> pl.DataFrame:
    """Per model x experiment of the later run: the served strings and fingerprints it named
    that the earlier run never named for that model, in any experiment. Providers rotate
    backends within a night, so a fingerprint seen before is no news; one never seen is. A run
    made before fingerprints were recorded named none: that is no change."""

    def new(col: str) -> pl.Expr:
        return (
            pl.when(pl.col(f"{col}_a").list.len() > 0)
            .then(pl.col(f"{col}_b").list.set_difference(f"{col}_a").list.sort())
            .otherwise(pl.lit([], pl.List(pl.String)))
            .alias(f"new_{col}")
        )

    before = a.served_by_model().rename({"served": "served_a", "fingerprints": "fingerprints_a"})
    names = b.run.models | a.run.models
    return (
        b.calls.select(
            "modelKey", "experimentSlug", served_b="served", fingerprints_b="fingerprints"
        )
        .join(before, on="modelKey")
        .with_columns(
            new("served"),
            new("fingerprints"),
            model=pl.col("modelKey").replace_strict(names, default=pl.col("modelKey")),
        )
    )


def _flag_rows(c: Comparison) -> list[dict[str, Any]]:
    flags = []
    for r in c.effects.filter(pl.col("flags").list.len() > 0).iter_rows(named=True):
        what = {k: r[k] for k in ("study", "measure", "experiment", "strategy", "model")}
        for name in r["flags"]:
            flags.append(
                {
                    "flag": name,
                    **what,
                    "detail": f"{_num(r['effect_a'])} -> {_num(r['effect_b'])} "
                    f"(change {_num(r['change'])}, q = {_num(r['q'])})",
                }
            )
    for r in c.rates.filter(pl.col("q") < ALPHA).iter_rows(named=True):
        flags.append(
            {
                "flag": "parse_error_rate" if r["rate"] == "parse errors" else "refusal_rate",
                "model": r["model"],
                "detail": f"{r['count_a']}/{r['of_a']} -> {r['count_b']}/"
                f"{r['of_b']} (q = {_num(r['q'])})",
            }
        )
    every = c.served.group_by("modelKey").agg(pl.len())  # experiments per model in the later run
    for name, col in (("served_model", "served"), ("fingerprint", "fingerprints")):
        # one flag per model and new string, naming the experiments that saw it
        moved = (
            c.served.filter(pl.col(f"new_{col}").list.len() > 0)
            .with_columns(
                old=pl.col(f"{col}_a").list.sort().list.join(", "),
                new=pl.col(f"new_{col}").list.join(", "),
            )
            .group_by("modelKey", "model", "old", "new", maintain_order=True)
            .agg(pl.col("experimentSlug").sort())
            .join(every, on="modelKey")
        )
        for r in moved.iter_rows(named=True):
            where = (
                "all experiments"
                if len(r["experimentSlug"]) == r["len"]
                else ", ".join(r["experimentSlug"])
            )
            flags.append(
                {
                    "flag": name,
                    "experiment": where,
                    "model": r["model"],
                    "detail": f"new {r['new']} (before: {r['old']})",
                }
            )
    for side in (c.a, c.b):
        if why := side.unfinished():
            flags.append({"flag": "incomplete", "detail": why})
    if c.plan_changes:
        flags.append({"flag": "plan_changed", "detail": "; ".join(c.plan_changes)})
    return flags


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _same_models(a: RunEffects, b: RunEffects) -> RunEffects:
    """b with a model whose identity changed (a setting: max_tokens, temperature...) under the
    earlier run's key, when one model of that label is new and one is gone: the plan change
    says what changed, and its effects and rates are still compared. Two of one label stay
    apart (which is which cannot be told)."""
    labels_a, labels_b = a.run.manifest.get("models", {}), b.run.manifest.get("models", {})
    gone = [k for k in labels_a if k not in labels_b]
    renamed = {}
    for key, label in labels_b.items():
        if key in labels_a:
            continue
        match = [k for k in gone if labels_a[k] == label]
        if len(match) == 1 and sum(v == label for v in labels_b.values()) == 1:
            renamed[key] = match[0]
    if not renamed:
        return b
    key = pl.col("modelKey").replace(renamed)
    return dataclasses.replace(
        b,
        effects=b.effects.with_columns(key),
        calls=b.calls.with_columns(key),
        models=b.models.with_columns(key),
    )


def compare(a: RunEffects, b: RunEffects) -> Comparison:
    b = _same_models(a, b)
    effects, only_a, only_b = effect_changes(a.effects, b.effects)
    names = b.run.models | a.run.models
    rates = rate_changes(a.models, b.models, names)
    effects, rates = adjust(effects, rates)
    plan_a, plan_b = a.run.manifest["plan"], b.run.manifest["plan"]
    plan = (
        []
        if plan_a["hash"] == plan_b["hash"]
        else (describe_changes(plan_a, plan_b) or ["the task plans differ"])
    )
    c = Comparison(a, b, _effect_flags(effects), rates, _served(a, b), only_a, only_b, plan)
    c.flags = _flag_rows(c)
    return c


def _side(r: RunEffects) -> dict[str, Any]:
    m = r.run.manifest
    return {
        "path": str(r.run.path),
        "campaign": m["campaign"],
        "runId": m["runId"],
        "createdAt": m["createdAt"],
        "planHash": m["plan"]["hash"],
        "software": m["software"],
    }


def as_json(c: Comparison, fail_on: set[str], exit_code: int) -> dict[str, Any]:
    counts = {name: sum(f["flag"] == name for f in c.flags) for name in FLAGS}
    return {
        "schema": SCHEMA,
        "a": _side(c.a),
        "b": _side(c.b),
        "plan": {"same": not c.plan_changes, "changes": c.plan_changes},
        "effects": c.effects.to_dicts(),
        "rates": c.rates.to_dicts(),
        "served": c.served.to_dicts(),
        "unshared": {"only_a": c.only_a.to_dicts(), "only_b": c.only_b.to_dicts()},
        "flags": c.flags,
        "counts": counts,
        "fail_on": sorted(fail_on),
        "exit_code": exit_code,
    }

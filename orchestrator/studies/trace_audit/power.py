"""Power of the trace audit's headline test: the judge's score of an experiment's own bias,
last condition of the source run minus its first (analysis.by_condition).

The unit is the item (clustered.py): an item's traces in a condition (the source's samples x
option orders) are averaged, and the difference is tested over the items in both conditions
with a paired t on K - 1 df (clustered.condition_difference; CR2 by item where an `items`
sample left some items in one condition: planned over the paired ones, conservatively, as the
lone items add power). An item's difference then has variance

    tau^2 + within * (1/m_first + 1/m_last)  ~  tau^2 + 2 * within / m

tau^2 the spread of items' true differences (item x condition), `within` the variance of one
trace's score about its item's mean in its condition, m the traces per item and condition.
Traces average `within` away, never tau^2: the MDE has a floor that only more items lower. At
a deterministic source (temperature 0) an item's traces are one text, judged alike: they are
one draw, and more of them add nothing (the design does not improve with samples; the test
still runs, over the items). "Samples" here are those traces per item and condition: more
need a new source run at more samples (or option orders), then its audit, one judge call per
trace. The shipped source, the 11-bias study, has 3-5 items per experiment: df 2-4, and under
the defaults an MDE of 1.7 (5 items) to 3.1 points (3 items) on the 1-5 scale however many the
samples; an `items` sample of the audit's traces can leave an experiment no item in both
conditions at all (then no row has a design, and the note says why).

Everything is on the scale the study reports: the mean of the items' mean (integer) scores.
The judge's own temperature does not enter: one call per trace, and the spread of its scores
over an item's traces is `within`, whatever makes it. The slow test plants an effect whose
*observed* difference (after rounding and clipping to 1-5) is the MDE in an item-clustered
judge and runs by_condition on it: 0.79-0.83 detected (a little above 0.8 at 5 items, where
clipping narrows the scores at so large an effect), 4.4-5.1% at no effect.
Defaults without a pilot: a trace's score SD 1 within its item and condition (a quarter of the
1-5 scale) and items' true differences SD 1 (an item x condition SD of 0.7 in each condition,
as in the study's own null simulation: tests/test_trace_audit_clustered.py). With a pilot audit
run, both from its scores (`pilot_spread`): one-way ANOVA within item x condition, and the
items' differences' variance less what that noise puts in it. A judge sampled more than once
per trace is counted once per trace (conservative: its repeats are one at temperature 0).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from orchestrator.analysis.power import Planned, Precision, mde, one_way
from orchestrator.studies.trace_audit import KIND
from orchestrator.studies.trace_audit.validate import BIAS_TYPES

SCALE = "points on 1-5"
WITHIN_SD = 1.0  # a quarter of the judge's 1-5 scale
TAU_SD = 1.0  # items' true differences: item x condition SD 0.7 in each condition, x sqrt(2)
DEFAULT = (
    f"default: a trace's score SD {WITHIN_SD:g} within its item and condition (a quarter of "
    f"the 1-5 scale), items' true differences SD {TAU_SD:g} (item x condition SD 0.7 per "
    "condition)"
)


@dataclass(frozen=True)
class Spread:
    """The variance components the MDE needs, on the reported 1-5 score scale."""

    within: float  # variance of a trace's score about its item's mean in its condition
    tau2: float  # variance of items' true differences, last condition - first


def item_design(items: int, spread: Spread, deterministic: bool = False):
    """The paired t over `items` items, `samples` traces per item and condition (one draw,
    whatever their number, at a deterministic source)."""

    def design(samples: int, effect: float) -> Precision:
        traces = 1 if deterministic else max(samples, 1)
        se = math.sqrt((spread.tau2 + 2 * spread.within / traces) / items)
        return Precision(se, se, df=items - 1)

    return design


def own_bias(experiment: str) -> str | None:
    """The audited bias an experiment probes (anchoring -> Anchoring), or None."""
    return next((b for b in BIAS_TYPES if b.lower() in experiment.lower()), None)


def pilot_spread(frame) -> tuple[Spread, str] | None:
    """Variance components from an audit frame with columns stratum (one test: an experiment x
    bias), item, cond and score (one validated score per trace), each stratum's first and last
    condition compared, as by_condition does. None where fewer than two items are in both."""
    import numpy as np
    import polars as pl

    bounds = frame.group_by("stratum").agg(first=pl.col("cond").min(), last=pl.col("cond").max())
    ends = frame.join(bounds, on="stratum").filter(
        (pl.col("cond") == pl.col("first")) | (pl.col("cond") == pl.col("last"))
    )
    ends = ends.with_columns(arm=pl.col("cond") == pl.col("last")).filter(
        pl.col("first") != pl.col("last")
    )
    if not ends.height:
        return None
    groups = (ends["stratum"] + "|" + ends["item"] + "|" + ends["arm"].cast(str)).to_numpy()
    within, _ = one_way(ends["score"].to_numpy(), groups)
    cells = ends.group_by("stratum", "item", "arm").agg(m=pl.col("score").mean(), n=pl.len())
    last, first = (cells.filter(pl.col("arm") == a).drop("arm") for a in (True, False))
    pairs = last.join(first, on=["stratum", "item"], suffix="_0")
    if pairs.height < 2:
        return None
    d = (pairs["m"] - pairs["m_0"]).to_numpy()
    strata = pairs["stratum"].to_numpy()
    centred = d - np.array([d[strata == s].mean() for s in strata])
    free = len(d) - len(set(strata))
    if free < 1:
        return None
    observed = float((centred**2).sum() / free)
    if not math.isfinite(within):  # one trace per item and condition: no within to tell apart
        spread, how = Spread(0.0, observed), "one trace per item and condition: taken whole"
    else:
        noise = within * float((1 / pairs["n"] + 1 / pairs["n_0"]).mean())
        spread, how = Spread(within, max(0.0, observed - noise)), ""
    said = (
        f"a trace's score SD {math.sqrt(spread.within):.3g} within its item and condition, "
        f"items' true differences SD {math.sqrt(spread.tau2):.3g} ({pairs.height} items, "
        f"{ends.height} scores{'; ' + how if how else ''})"
    )
    return spread, said


def _pilot_frame(pilot):
    """The pilot audit's validated scores: stratum-ready columns, or None without an audit."""
    if pilot is None or not any(job.kind == KIND for job in pilot.jobs.values()):
        return None
    import polars as pl

    from orchestrator.studies.trace_audit.clustered import ITEM, with_items
    from orchestrator.studies.trace_audit.records import audit_frame

    frame = audit_frame(pilot).filter(
        pl.col("source_experiment").is_not_null() & pl.col("judge_score").is_not_null()
    )
    return with_items(frame).select(
        "model_key",
        "source_experiment",
        "bias",
        # one test of by_condition: its other keys, so that no two tests' scores mix
        test=pl.concat_str(
            "source_model", "source_strategy", "context_mode", separator="|", ignore_nulls=True
        ),
        item=pl.col(ITEM),
        cond=pl.col("source_condition"),
        score=pl.col("judge_score").cast(pl.Float64),
    )


def _measured(frame, experiment: str, judge: str) -> tuple[Spread | None, str] | None:
    """This experiment on this judge; else on any judge; else, where the pilot has no trace
    of it, every experiment pooled (each with its own bias, or all four where it has none).
    (None, why) where the pilot's scores of it do not vary: nothing to plan with."""
    import polars as pl

    if frame is None or not frame.height:
        return None

    def on_target(part):
        own = part["source_experiment"].map_elements(own_bias, return_dtype=pl.String)
        keep = part.filter(own.is_null() | (pl.col("bias") == own))
        return keep.with_columns(
            stratum=pl.concat_str("source_experiment", "bias", "model_key", "test", separator="|")
        )

    mine = frame.filter(pl.col("source_experiment") == experiment)
    tries = (
        [(mine.filter(pl.col("model_key") == judge), ""), (mine, " (other judges' scores)")]
        if mine.height
        else [(frame, " (all experiments pooled: this one is not in the pilot)")]
    )
    for part, where in tries:
        found = pilot_spread(on_target(part)) if part.height else None
        if found and found[0].within + found[0].tau2 > 0:
            return found[0], found[1] + where
        if found:
            return None, f"its scores do not vary{where}"
    return None


def _source_determinism(runs) -> dict[tuple[str, str], bool | None]:
    """(source run, source model label) -> whether that model is deterministic, from the
    source run's manifest; None where the run cannot be read."""
    from orchestrator.engine.run_folder import campaign_of_run
    from orchestrator.errors import UserError

    models: dict[str, dict[str, bool] | None] = {}
    for where in {where for where, _ in runs}:
        try:
            config = campaign_of_run(Path(where)).config
            models[where] = {m.label: m.deterministic for m in config.models}
        except (UserError, OSError, KeyError, ValueError):
            models[where] = None
    return {(w, label): (models[w] or {}).get(label) for w, label in runs}


class Counted:
    """One planned test's traces: per (condition, item) how many, and their distinct texts."""

    def __init__(self) -> None:
        self.traces: dict[tuple[int, str], int] = defaultdict(int)
        self.texts: dict[tuple[int, str], set] = defaultdict(set)
        self.runs: set[tuple[str, str]] = set()  # (source run, source model label)
        self.audit_experiments: set[str] = set()
        self.unauditable = 0  # traces the seed's guard leaves unaudited: no call, no score


def count(plan) -> dict[tuple[str, str, str, str, str], Counted]:
    """Per (audit job, judge, source model, source strategy, source experiment): the planned
    traces per item and condition. A trace the seed's guard leaves unaudited gives no score."""
    counted: dict[tuple[str, str, str, str, str], Counted] = defaultdict(Counted)
    for cell in plan.cells:
        item = cell.variant.item or {}
        if cell.job.kind != KIND or item.get("source_experiment") is None:
            continue
        key = (
            cell.job.id,
            cell.model_key,
            str(item.get("source_model")),
            str(item.get("source_strategy")),
            str(item["source_experiment"]),
        )
        where = (int(item["source_condition"]), str(item.get("source_item", cell.variant.id)))
        got = counted[key]
        got.audit_experiments.add(cell.experiment.slug)
        if item.get("not_auditable") and not item.get("allowed"):
            got.unauditable += 1
            continue
        got.traces[where] += 1
        got.texts[where].add(item.get("trace"))
        got.runs.add((str(item.get("source_run")), str(item.get("source_model"))))
    return counted


def _deterministic(got: Counted, known: dict[tuple[str, str], bool | None]) -> bool:
    """Whether the source's traces of an item are one draw: its model at temperature 0, or,
    where its run cannot be read, every item's repeated traces one text."""
    said = [known.get(r) for r in got.runs]
    if any(s is True for s in said):
        return True
    if said and all(s is False for s in said):
        return False
    repeated = [texts for where, texts in got.texts.items() if got.traces[where] > 1]
    return bool(repeated) and all(len(t) == 1 for t in repeated)


def power(plan, pilot, alpha: float) -> list[Planned]:
    counted = count(plan)
    if not counted:
        return []
    known = _source_determinism({run for got in counted.values() for run in got.runs})
    frame = _pilot_frame(pilot)
    sources: dict[tuple[str, str], set] = defaultdict(set)
    for job, _, model, strategy, experiment in counted:
        sources[job, experiment].add((model, strategy))
    return [
        _row(key, got, frame, pilot, alpha, _deterministic(got, known), sources[key[0], key[4]])
        for key, got in sorted(counted.items())
    ]


def _row(key, got: Counted, frame, pilot, alpha: float, deterministic: bool, sources) -> Planned:
    job, judge, model, strategy, experiment = key
    conditions = sorted({c for c, _ in got.traces}) or [0]
    first, last = conditions[0], conditions[-1]
    arms = [{i for c, i in got.traces if c == end} for end in (first, last)]
    paired = sorted(arms[0] & arms[1]) if len(conditions) > 1 else []
    lone = len(arms[0] | arms[1]) - len(paired)
    counts = [got.traces[c, i] for i in paired for c in (first, last)]
    traces = max(1, round(len(counts) / sum(1 / n for n in counts))) if counts else 1
    bias = own_bias(experiment)
    measured = _measured(frame, experiment, judge)
    if measured and measured[0]:
        spread, variance = measured[0], f"pilot {_name(pilot)}: {measured[1]}"
    else:
        spread, variance = Spread(WITHIN_SD**2, TAU_SD**2), DEFAULT
        if measured:  # the pilot's scores alike: the study would give no test; plan on defaults
            variance = f"pilot {_name(pilot)}: {measured[1]}; {DEFAULT}"
    notes = [
        "samples: traces per item and condition (the source's samples x option orders; more "
        "need a new source run, then its audit: calls and cost here are the audit's alone)"
    ]
    design = item_design(len(paired), spread, deterministic) if len(paired) >= 2 else None
    if design is None:
        if not got.traces:
            why = "no auditable trace: no score to test"
        elif len(conditions) < 2:
            why = "the audit has traces of one condition only: no difference to test"
        elif lone:
            why = (
                f"{len(paired)} item(s) in both conditions, {lone} in one: CR2 by item tests "
                "them, but this plan cannot (it would need the items' own spread); more items "
                "in both conditions help"
            )
        else:
            why = f"{len(paired)} item(s) in both conditions: no test; only more items help"
        notes.insert(0, why)
    elif deterministic:
        notes.insert(
            0,
            f"T=0 source: an item's traces are one text, so more samples add nothing; the test "
            f"runs over its {len(paired)} items, and only more items help",
        )
    elif len(paired) < 10:
        notes.insert(
            0, f"only {len(paired)} items (df {len(paired) - 1}): more items lower the MDE"
        )
    if got.unauditable:
        notes.append(
            f"{got.unauditable} trace(s) too short to audit (the seed's guard): no call, no score"
        )
    if lone and design is not None:
        notes.append(
            f"{lone} item(s) in one condition only: tested by CR2 by item, planned over the "
            f"{len(paired)} in both (conservative: the lone items add power)"
        )
    reach = mde(design, traces, alpha, 0.8) if design is not None else None
    if reach is not None and reach > 4:
        notes.insert(0, "at 80% power the MDE is beyond the 1-5 scale's 4 points: out of reach")
    name = experiment if len(sources) == 1 else f"{experiment} ({model}, {strategy})"
    return Planned(
        study=KIND,
        job=job,
        experiment=name,
        model=judge,
        measure=(f"mean {bias} score" if bias else "each audited bias's mean score (none its own)")
        + ", last condition - first",
        scale=SCALE,
        test="paired t over items" if not lone else "CR2 by item",
        unit="items",
        units=len(paired),
        samples=traces,
        alpha=alpha,
        correction="",
        design=design,
        variance=variance,
        note="; ".join(notes),
        experiments=tuple(sorted(got.audit_experiments)),
    )


def _name(pilot) -> str:
    return f"{pilot.path.parent.name}/{pilot.path.name}"  # runs/<campaign>/<run id>

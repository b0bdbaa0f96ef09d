"""Power of the paired study's test (seed 000): condition 1 against condition 0 over answers.

The study tests a mean difference with Welch's t and a share of the target option with the
pooled two-proportion z-test, each over the answers of the two conditions (samples x prompt
variants per condition). Where a condition has several variants, the same item answers in
both conditions, so an item's own level cancels in the difference while the answer-level test
still counts it as noise: such a test is conservative, and the MDE takes both into account
(analysis/power.py: `se_test` against `se_true`). A deterministic model (temperature 0) gets
no test at all: its repeated answers are one draw.

Defaults without a pilot: a choice's share at 0.5 (the binomial variance's maximum), a
rating's SD a quarter of its scale, a number's a quarter of its plausible range (else effects
are in answer SDs), no item clustering (ICC 0: the largest error at a given answer SD).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from orchestrator.analysis.power import Planned, Precision, one_way

TEST = {
    "mean-difference": "Welch's t over answers",
    "choice-share-difference": "pooled two-proportion z over answers",
}


@dataclass(frozen=True)
class Spread:
    """What the MDE needs from the answers: the SD of one answer within a condition (a share's
    baseline instead, for a choice) and the share of its variance that belongs to the item."""

    sd: float  # a mean's answer SD; unused for shares
    share: float  # a choice's share of the target option in condition 0
    icc: float


def mean_design(variants: int, spread: Spread):
    def design(samples: int, effect: float) -> Precision:
        n = samples * variants
        se_test = spread.sd * math.sqrt(2 / n)
        return Precision(se_test, se_test * math.sqrt(1 - spread.icc), df=max(2 * n - 2, 1))

    return design


def share_design(variants: int, spread: Spread, centred: bool):
    """A share's test: the binomial variance at the shares the effect implies. `centred`
    (no pilot): the two shares sit either side of 0.5, where the variance is largest."""

    def design(samples: int, effect: float) -> Precision:
        n = samples * variants
        if centred:
            p0, p1 = 0.5 - effect / 2, 0.5 + effect / 2
        else:  # from the pilot's share, towards the side with room
            p0 = spread.share
            p1 = p0 + effect if p0 <= 0.5 else p0 - effect
        p0, p1 = min(max(p0, 0.0), 1.0), min(max(p1, 0.0), 1.0)
        pooled = (p0 + p1) / 2
        se_test = math.sqrt(2 * pooled * (1 - pooled) / n)
        se_true = math.sqrt((p0 * (1 - p0) + p1 * (1 - p1)) * (1 - spread.icc) / n)
        return Precision(se_test, se_true)

    return design


def _default_sd(experiment) -> tuple[float, str, str]:
    """(SD, the scale effects are in, how the SD was chosen)."""
    contract = experiment.conditions[0].variants[0].contract
    unit = experiment.metric.unit
    if contract.kind == "rating" and contract.minimum is not None:
        width = contract.maximum - contract.minimum
        return (
            width / 4,
            f"points on {contract.minimum}-{contract.maximum}",
            "a quarter of the scale",
        )
    plausible = experiment.conditions[0].variants[0].plausible_range
    if plausible:
        width = plausible[1] - plausible[0]
        return width / 4, unit or "answer units", "a quarter of the plausible range"
    return 1.0, "answer SDs", "1 (no scale known: effects in answer SDs)"


def pilot_spread(frame, metric, experiment) -> tuple[Spread, str] | None:
    """The pilot's answers of one experiment (and model, where it ran it): their SD within a
    condition, condition 0's share of the target, and the ICC by variant."""
    import numpy as np

    if frame.is_empty():
        return None
    if metric.type == "mean-difference":
        answers = frame.drop_nulls("value")
        values = answers["value"].to_numpy()
    else:
        answers = frame.drop_nulls("choice")
        values = (answers["choice"] == metric.target_option).cast(float).to_numpy()
    if len(values) < 4:
        return None
    # within each condition: the conditions' own means (the effect) are not item variance
    by_condition = answers["conditionIndex"].to_numpy()
    centred = values - np.array([values[by_condition == c].mean() for c in by_condition])
    groups = (answers["conditionIndex"].cast(str) + "/" + answers["variant"]).to_numpy()
    within, between = one_way(centred, groups)
    total = float(centred.var(ddof=1))
    icc = between / (between + within) if between + within > 0 else 0.0
    share = float(values[by_condition == 0].mean()) if (by_condition == 0).any() else 0.5
    said = (
        f"sd {math.sqrt(total):.3g}"
        if metric.type == "mean-difference"
        else f"condition 0's share {share:.2f}"
    )
    return Spread(math.sqrt(total), share, icc), f"{said}, ICC {icc:.2f}, {len(values)} answers"


def power(plan, pilot, alpha: float) -> list[Planned]:
    variants: dict[tuple, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    samples: dict[tuple, int] = {}
    found: dict[tuple, tuple] = {}
    for cell in plan.cells:
        if cell.job.kind != "paired" or len(cell.experiment.conditions) != 2:
            continue
        key = (cell.job.id, cell.experiment.slug, cell.model_key)
        variants[key][cell.condition.index].add(cell.variant.id)
        samples[key] = max(samples.get(key, 0), cell.samples)
        found[key] = (cell.experiment, cell.model)
    records = _pilot_records(pilot)
    rows = []
    for key, (experiment, model) in found.items():
        job, slug, model_key = key
        metric = experiment.metric
        count = min(len(v) for v in variants[key].values()) if len(variants[key]) == 2 else 0
        sd, scale, chosen = _default_sd(experiment)
        measured = None
        if records is not None:
            mine = records.filter(experimentSlug=slug, job=job)
            same = mine.filter(modelKey=model_key)
            measured = pilot_spread(same if same.height else mine, metric, experiment)
        if measured:
            spread, variance = (
                measured[0],
                f"pilot {pilot.path.parent.name}/{pilot.path.name}: " + measured[1],
            )
            if not same.height:
                variance += " (other models: this one is not in the pilot)"
            if scale == "answer SDs":  # the pilot's SD is in the answers' own units
                scale = metric.unit or "answer units"
        elif metric.type == "mean-difference":
            spread, variance = Spread(sd, 0.5, 0.0), f"default: answer SD {chosen}, ICC 0"
        else:
            spread, variance = Spread(1.0, 0.5, 0.0), "default: shares either side of 0.5, ICC 0"
        if count < 2:
            spread = Spread(spread.sd, spread.share, 0.0)  # one prompt: no item to cancel
        is_mean = metric.type == "mean-difference"
        design = (
            mean_design(count, spread)
            if is_mean
            else share_design(count, spread, centred=measured is None)
        )
        note = ""
        if model.deterministic:
            design, note = (
                None,
                (
                    "T=0: repeated answers are one draw, so the study gives no test; more samples "
                    "cannot help (sample at a temperature above 0)"
                ),
            )
        rows.append(
            Planned(
                study="paired",
                job=job,
                experiment=slug,
                model=model_key,
                measure=metric.label
                or ("mean difference" if is_mean else "share of the target option"),
                scale=scale if is_mean else "share",
                test=TEST[metric.type],
                unit="answers per condition",
                units=count * samples[key],
                samples=samples[key],
                alpha=alpha,
                correction="",
                design=design,
                variance=variance,
                note=note,
            )
        )
    return rows


def _pilot_records(pilot):
    if pilot is None or not any(job.kind == "paired" for job in pilot.jobs.values()):
        return None
    import polars as pl

    from orchestrator.analysis.load import final_records

    return final_records(pilot).filter(pl.col("status") == "ok").collect()

"""Which bias scores each generated item counts in, and with which target (section 3.3 of the
paper), read from the run's manifest (the items and their `Variant.item` facts are kept there).

- Decoy Cheaper / Decoy Expensive: treatment items whose target is the cheaper / the dearer
  option, target role "target"; control items (the pair alone) count in both, with the cheaper
  / the dearer option as target. Each row keeps its grid pair and the target's and the
  competitor's prices, for the per-pair (price gap) scores.
- Certainty: every item, target the safe option; Certainty (shared styles) again on the items
  of the lottery styles both arms have: a style only treatment has ("for certain") is a wording
  the control never reads, so the pooled score mixes it in with the sure prize.
- Belief Valid / Invalid: valid / invalid arguments, target the correct answer: believable
  real-term conclusions (treatment) against every invented-word one (control); an unbelievable
  valid or believable invalid real-term argument counts in neither score.

Each item also names its value cell (`cluster`), the unit of inference: a model answering by
content gives one answer to every prompt built from the same values, whatever the template or
the option order, so those prompts are one draw, not many. Decoy: the product's grid pair (its
control and treatment items, both sides, both decoys); certainty: the prize row (both arms,
every style and every chance row: the sure prize reads the same whatever the chances, so the
chance rows of one prize row are not independent either); belief: the term family in its
words (real or invented).
"""

from __future__ import annotations

import polars as pl

from orchestrator.analysis.load import Run

SHARED = "Certainty (shared styles)"
SCORES = (
    "Decoy Cheaper",
    "Decoy Expensive",
    "Certainty",
    SHARED,
    "Belief Valid",
    "Belief Invalid",
)
DECOY, CERTAINTY, BELIEF = "decoy effect", "certainty effect", "belief bias"
ITEM_KEYS = ["job", "experimentSlug", "conditionIndex", "variant"]
SCHEMA = {
    "job": pl.String,
    "experimentSlug": pl.String,
    "conditionIndex": pl.Int64,
    "variant": pl.String,
    "score": pl.String,
    "target": pl.String,
    "pair": pl.Int64,
    "target_price": pl.Float64,
    "competitor_price": pl.Float64,
    "cluster": pl.String,
}


def item_scores(
    experiment_label: str, condition: int, item: dict, shared_styles: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """(score, target role) pairs an item counts in."""
    if experiment_label == DECOY:
        if condition == 0:
            return [("Decoy Cheaper", "cheaper"), ("Decoy Expensive", "expensive")]
        return [(f"Decoy {item['side'].title()}", "target")]
    if experiment_label == CERTAINTY:
        shared = [(SHARED, "safe")] if item.get("style") in shared_styles else []
        return [("Certainty", "safe"), *shared]
    consistent = item["believable"] == (item["form"] == "valid")
    if condition == 0 or consistent:
        return [(f"Belief {item['form'].title()}", item["form"])]
    return []


def value_cell(experiment_label: str, item: dict) -> str:
    """The item's value cell: what every prompt built from the same values shares."""
    if experiment_label == DECOY:
        return f"p{item['pair']:02d}"
    if experiment_label == CERTAINTY:
        return f"x{item['prize']:02d}"
    return f"{item['terms']}{item['family']:02d}"


def prices(target: str, item: dict) -> tuple[float, float] | tuple[None, None]:
    """(target price, competitor price) of a decoy item for the score whose target role is
    `target`; (None, None) for other items."""
    if target == "target":
        return item["target_price"], item["competitor_price"]
    if target in ("cheaper", "expensive"):
        other = "expensive" if target == "cheaper" else "cheaper"
        return item[f"{target}_price"], item[f"{other}_price"]
    return None, None


def experiments(run: Run, kind: str):
    """(job id, experiment) of every experiment in the run's jobs of this study."""
    for job in run.jobs.values():
        if job.kind == kind:
            for exp in job.experiments:
                yield job.id, exp


def shared_styles(experiment) -> frozenset[str]:
    """The certainty lottery styles both arms have (none for other datasets)."""
    styles = [
        frozenset(str(s) for v in c.variants if (s := (v.item or {}).get("style")) is not None)
        for c in experiment.conditions
    ]
    return frozenset.intersection(*styles)


def items_frame(run: Run, kind: str) -> pl.DataFrame:
    """One row per item and score it counts in."""
    rows = []
    for job_id, exp in experiments(run, kind):
        decoy = exp.metric.label == DECOY
        shared = shared_styles(exp)
        for cond in exp.conditions:
            for v in cond.variants:
                item = v.item or {}
                cell = value_cell(exp.metric.label, item)
                for score, role in item_scores(exp.metric.label, cond.index, item, shared):
                    pair = item["pair"] if decoy else None
                    rows.append(
                        (job_id, exp.slug, cond.index, v.id, score, role, pair)
                        + (*prices(role, item), cell)
                    )
    return pl.DataFrame(rows, orient="row", schema=SCHEMA)


def belief_frame(run: Run, kind: str) -> pl.DataFrame:
    """Every belief item with its correct answer (`predicted`: the argument's form), the words
    it is in (real: treatment; invented: control) and its value cell (its term family)."""
    rows = [
        (job_id, exp.slug, cond.index, v.id, v.predicted, ("invented", "real")[cond.index])
        + (value_cell(BELIEF, v.item or {}),)
        for job_id, exp in experiments(run, kind)
        if exp.metric.label == BELIEF
        for cond in exp.conditions
        for v in cond.variants
    ]
    return pl.DataFrame(
        rows,
        orient="row",
        schema={
            "job": pl.String,
            "experimentSlug": pl.String,
            "conditionIndex": pl.Int64,
            "variant": pl.String,
            "correct": pl.String,
            "words": pl.String,
            "cluster": pl.String,
        },
    )

"""Expanding a templated dataset into items: template x value-grid row x option order x condition.

Each item is a Variant whose id is built from its template id, grid indices and option order
(`t1.p03.cheaper-d1.o201`), so an item keeps its id, and its tasks their ids, when other
templates or rows of the file change. `Variant.item` records where it came from: the template,
the grid indices, the values put in and the option order, and the facts its scoring reads
(roles are on the contract; `predicted` is the item's target role); `group` (the item in all
its orders) and `stratum` (the kind of item a score counts) keep a sample (`items`) balanced.

Decoy: control shows the pair (cheaper, expensive) in both orders; treatment adds a decoy made
from the target (cheaper or expensive) by each of the dataset's decoy shifts, in all 3! orders.
Certainty: treatment is the risky lottery against a sure prize; control scales both chances by
the same factor, so neither is sure and the risky one keeps the higher expected value.
Belief: valid and invalid syllogisms with believable and unbelievable conclusions in real
terms (treatment), the same forms in invented words (control), in both premise orders.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from orchestrator.spec.models import ResponseContract, Shot, Variant
from orchestrator.studies.instructed.spec import BeliefDataset, CertaintyDataset, DecoyDataset

CONTROL, TREATMENT = 0, 1
COUNT_WORDS = {2: "two", 3: "three"}


def _order_tag(order: tuple[int, ...]) -> str:
    return "o" + "".join(map(str, order))


def _choice(labels: list[str], roles: list[str]) -> ResponseContract:
    return ResponseContract(
        kind="choice", field="choice", options=tuple(labels), roles=tuple(roles)
    )


def _variant(
    vid: str,
    prompt: str,
    instruction: str,
    contract: ResponseContract,
    predicted: str,
    domain: str,
    item: dict,
) -> Variant:
    options = ", ".join(f'"{o}"' for o in contract.options)
    return Variant(
        id=vid,
        prompt=prompt,
        instruction=instruction.replace("{options}", options),
        contract=contract,
        predicted=predicted,
        domain=domain,
        item=item,
    )


# --- decoy -----------------------------------------------------------------------------------


def price_text(price: float, step: float) -> str:
    return f"{price:,.2f}" if step < 1 else f"{price:,.0f}"


def decoy_of(ds: DecoyDataset, price: float, quality: int, shift) -> tuple[float, int]:
    raised = round(price * (1 + shift.price) / ds.price_step) * ds.price_step
    return round(raised, 2), quality - shift.quality


def decoy_options(
    ds: DecoyDataset, pair_index: int, side: str | None, decoy_index: int | None
) -> dict[str, tuple[float, int]]:
    """Role -> (price, quality) of one grid row: control (side None) has the pair by price;
    treatment has target, competitor and the target's decoy."""
    pc, qc, pe, qe = ds.pairs[pair_index]
    cheaper, expensive = (pc, qc), (pe, qe)
    if side is None:
        return {"cheaper": cheaper, "expensive": expensive}
    target, competitor = (cheaper, expensive) if side == "cheaper" else (expensive, cheaper)
    return {
        "target": target,
        "competitor": competitor,
        "decoy": decoy_of(ds, *target, ds.decoys[decoy_index]),
    }


def decoy_prompt(
    ds: DecoyDataset, template: str, options: dict[str, tuple[float, int]], order: tuple[int, ...]
) -> tuple[str, list[str], list[str]]:
    """The prompt without the answer instruction, the labels and each label's role."""
    roles = list(options)
    shown = [roles[i] for i in order]
    labels = [f"{ds.label} {n}" for n in range(1, len(shown) + 1)]
    lines = " ".join(
        ds.option.format(
            label=label, price=price_text(options[r][0], ds.price_step), quality=options[r][1]
        )
        for label, r in zip(labels, shown)
    )
    text = template.format(count=COUNT_WORDS[len(shown)], noun=ds.noun, options=lines)
    return text, labels, shown


def decoy_items(ds: DecoyDataset, instruction: str) -> Iterator[tuple[int, Variant]]:
    rows = [(CONTROL, p, None, None) for p in range(len(ds.pairs))]
    rows += [
        (TREATMENT, p, side, d)
        for p in range(len(ds.pairs))
        for side in ("cheaper", "expensive")
        for d in range(len(ds.decoys))
    ]
    for t in ds.templates:
        for cond, p, side, d in rows:
            options = decoy_options(ds, p, side, d)
            for order in itertools.permutations(range(len(options))):
                text, labels, shown = decoy_prompt(ds, t.text, options, order)
                kind = "control" if side is None else f"{side}-d{d}"
                item = {
                    "template": t.id,
                    "pair": p,
                    "side": side or "",
                    "decoy": -1 if d is None else d,
                    "order": "".join(map(str, order)),
                    "shown": ",".join(shown),
                    **{f"{r}_price": v[0] for r, v in options.items()},
                    **{f"{r}_quality": v[1] for r, v in options.items()},
                }
                vid = f"{t.id}.p{p:02d}.{kind}.{_order_tag(order)}"
                item |= {"group": vid.rpartition(".")[0], "stratum": side or "control"}
                yield (
                    cond,
                    _variant(
                        vid,
                        text,
                        instruction,
                        _choice(labels, shown),
                        "target" if side else "",
                        ds.product,
                        item,
                    ),
                )


# --- certainty -------------------------------------------------------------------------------


def chance_text(percent: float, style: str) -> str:
    if style == "percent":
        return f"{percent:g}%"
    return f"{percent / 100:g}"


def lottery_text(style, prize: int, percent: float | None) -> str:
    if percent is None:
        return style.certain.format(prize=f"{prize:,}")
    return style.lottery.format(
        prize=f"{prize:,}",
        chance=chance_text(percent, style.chance),
        rest=chance_text(100 - percent, style.chance),
    )


def certainty_chances(
    ds: CertaintyDataset, chance_index: int, cond: int
) -> dict[str, float | None]:
    """Role -> percent chance of its prize (None: sure)."""
    c = ds.chances[chance_index]
    if cond == TREATMENT:
        return {"risky": float(c.risky), "safe": None}
    return {"risky": round(c.risky * c.scale, 4), "safe": round(100 * c.scale, 4)}


def certainty_items(ds: CertaintyDataset, instruction: str) -> Iterator[tuple[int, Variant]]:
    grid = list(itertools.product(range(len(ds.prizes)), range(len(ds.chances))))
    for t in ds.templates:
        for style in ds.styles:
            for cond in (CONTROL, TREATMENT):
                if ("control", "treatment")[cond] not in style.conditions:
                    continue
                for x, c in grid:
                    prizes = dict(zip(("risky", "safe"), ds.prizes[x]))
                    chances = certainty_chances(ds, c, cond)
                    for order in itertools.permutations(range(2)):
                        shown = [("risky", "safe")[i] for i in order]
                        labels = [f"{ds.label} {k}" for k in "AB"]
                        lines = " ".join(
                            ds.option.format(
                                label=label, lottery=lottery_text(style, prizes[r], chances[r])
                            )
                            for label, r in zip(labels, shown)
                        )
                        item = {
                            "template": t.id,
                            "style": style.id,
                            "prize": x,
                            "chance": c,
                            "order": "".join(map(str, order)),
                            "shown": ",".join(shown),
                            "risky_prize": prizes["risky"],
                            "safe_prize": prizes["safe"],
                            "risky_percent": chances["risky"],
                            "safe_percent": 100.0 if chances["safe"] is None else chances["safe"],
                        }
                        vid = (
                            f"{t.id}.{style.id}.{('control', 'treatment')[cond]}"
                            f".x{x:02d}.c{c:02d}.{_order_tag(order)}"
                        )
                        item |= {"group": vid.rpartition(".")[0], "stratum": style.id}
                        yield (
                            cond,
                            _variant(
                                vid,
                                t.text.format(options=lines),
                                instruction,
                                _choice(labels, shown),
                                "safe",
                                "lotteries",
                                item,
                            ),
                        )


# --- belief ----------------------------------------------------------------------------------

BELIEF_LABELS = ["valid", "invalid"]


def syllogism(a: str, b: str, c: str, form: str) -> tuple[list[str], str]:
    """(premises, conclusion): All a are b, and All b are c (valid: All a are c) or Some b are c
    (invalid: Some a are c)."""
    q = "All" if form == "valid" else "Some"
    return [f"All {a} are {b}.", f"{q} {b} are {c}."], f"{q} {a} are {c}."


def belief_items(ds: BeliefDataset, instruction: str) -> Iterator[tuple[int, Variant]]:
    for t in ds.templates:
        for cond, families, words in (
            (CONTROL, ds.invented, "invented"),
            (TREATMENT, ds.real, "real"),
        ):
            for f, terms in enumerate(families):
                for form, believable in itertools.product(("valid", "invalid"), (True, False)):
                    c = (terms.valid if form == "valid" else terms.invalid)[0 if believable else 1]
                    premises, conclusion = syllogism(terms.a, terms.b, c, form)
                    for order in ((0, 1), (1, 0)):
                        text = t.text.format(
                            premises=" ".join(premises[i] for i in order), conclusion=conclusion
                        )
                        belief = "believable" if believable else "unbelievable"
                        item = {
                            "template": t.id,
                            "terms": words,
                            "family": f,
                            "form": form,
                            "believable": believable,
                            "order": "".join(map(str, order)),
                            "a": terms.a,
                            "b": terms.b,
                            "c": c,
                        }
                        # in invented words the two conclusions differ only in the word used
                        vid = f"{t.id}.{words}{f:02d}.{form}-{belief}.{_order_tag(order)}"
                        item |= {"group": vid.rpartition(".")[0], "stratum": f"{form}-{belief}"}
                        yield (
                            cond,
                            _variant(
                                vid,
                                text,
                                instruction,
                                _choice(BELIEF_LABELS, BELIEF_LABELS),
                                form,
                                "syllogisms",
                                item,
                            ),
                        )


def belief_task_shots(ds: BeliefDataset) -> list[Shot]:
    """Task few-shot examples: syllogisms of the first template in the few-shot words only (no
    test item has them), valid and invalid in turn, each with its correct answer."""
    words, template = ds.few_shot_words, ds.templates[0].text
    shots = []
    for i in range(len(words) - 2):
        form = ("valid", "invalid")[i % 2]
        premises, conclusion = syllogism(words[i], words[i + 1], words[i + 2], form)
        shots.append(
            Shot(
                prompt=template.format(premises=" ".join(premises), conclusion=conclusion),
                answer=form,
            )
        )
    return shots

"""Reading an `instructed-to-bias/1` job: check the design the paper asks of the values (decoys
asymmetrically dominated, the risky lottery worth more, few-shot words kept out of the tests),
then expand every dataset into one experiment of a control and a treatment condition.

The items are generated here, at read time, not lazily by the planner: the planner already
keeps one cell per item (not per task) and the whole job is about 9,000 items, which take well
under a second to build; its tasks are then produced lazily as for any job.
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError
from orchestrator.spec.loading import validate
from orchestrator.spec.models import Condition, Experiment, Job, Metric, Shot
from orchestrator.studies.instructed import KIND, generate
from orchestrator.studies.instructed.spec import FORMAT, DecoyDataset, TemplatedJob

QUALITY = (60, 90)  # the quality ratings of target and competitor


def is_templated(data: Any) -> bool:
    return isinstance(data, dict) and data.get("format") == FORMAT


def _bad(message: str, path: Path, field: str, fix: str) -> UserError:
    return UserError(message, file=path, field=field, fix=fix)


def dominated(item: tuple[float, int], by: tuple[float, int]) -> bool:
    """Whether `by` is at least as good as `item` on price and quality, and better on one."""
    return by[0] <= item[0] and by[1] >= item[1] and by != item


def check_decoy(ds: DecoyDataset, path: Path, where: str) -> None:
    lo, hi = ds.price_range
    for p, (pc, qc, pe, qe) in enumerate(ds.pairs):
        field = f"{where}.pairs[{p}]"
        if not (lo <= pc < pe <= hi and QUALITY[0] <= qc < qe <= QUALITY[1]):
            raise _bad(
                f"pair {p} is not a cheaper-and-worse against a dearer-and-better option "
                f"within prices {lo:g}-{hi:g} and qualities {QUALITY[0]}-{QUALITY[1]}",
                path,
                field,
                "give [cheaper price, its quality, higher price, higher quality]",
            )
        for side in ("cheaper", "expensive"):
            for d in range(len(ds.decoys)):
                o = generate.decoy_options(ds, p, side, d)
                if not (
                    dominated(o["decoy"], o["target"])
                    and not dominated(o["decoy"], o["competitor"])
                    and o["decoy"][0] <= hi
                ):
                    raise _bad(
                        f"decoy {d} of pair {p} with the {side} option as target is not "
                        f"asymmetrically dominated within the price range (decoy {o['decoy']})",
                        path,
                        field,
                        "widen the pair's price or quality gap, or change the decoy",
                    )


def check_certainty(ds, path: Path, where: str) -> None:
    for x, (risky, safe) in enumerate(ds.prizes):
        for c, chance in enumerate(ds.chances):
            if risky * chance.risky / 100 <= safe:
                raise _bad(
                    f"prizes[{x}] with chances[{c}]: the risky option's expected value "
                    f"({risky * chance.risky / 100:g}) is not above the sure {safe}",
                    path,
                    f"{where}.prizes[{x}]",
                    "raise the risky prize or lower the safe one",
                )
    if not any(s.chance == "percent" for s in ds.styles):
        raise _bad(
            "no lottery style writes chances as percentages",
            path,
            f"{where}.styles",
            'add a style with "chance": "percent"',
        )


def words_of(terms) -> set[str]:
    return {
        w.lower()
        for t in terms
        for text in (t.a, t.b, *t.valid, *t.invalid)
        for w in re.findall(r"[a-z-]+", text.lower())
    }


def check_belief(ds, path: Path, where: str) -> None:
    few = {w for text in ds.few_shot_words for w in re.findall(r"[a-z-]+", text.lower())}
    shared = sorted(few & (words_of(ds.invented) | words_of(ds.real)))
    if shared:
        raise _bad(
            f"few-shot words also in test items: {', '.join(shared)}",
            path,
            f"{where}.few_shot_words",
            "keep the few-shot words out of the test items' terms",
        )


def _generated(items, path: Path, where: str) -> dict[int, list]:
    by_condition: dict[int, list] = {0: [], 1: []}
    try:
        for cond, variant in items:
            by_condition[cond].append(variant)
    except (KeyError, IndexError, ValueError) as exc:
        raise _bad(
            f"a template or option text has a placeholder it cannot fill ({exc})",
            path,
            where,
            "use only the placeholders the format names (orchestrator/studies/instructed/README.md)",
        ) from None
    for cond, variants in by_condition.items():
        if not variants:
            raise _bad(
                f"no {('control', 'treatment')[cond]} items",
                path,
                where,
                "give every condition at least one template, style and grid row",
            )
    return by_condition


def _experiment(
    slug: str, label: str, by_condition: dict[int, list], format_shots: list, task_shots: list
) -> Experiment:
    conditions = tuple(
        Condition(index=c, label=("control", "treatment")[c], variants=tuple(v))
        for c, v in by_condition.items()
    )
    return Experiment(
        slug=slug,
        bias_slug=slug,
        conditions=conditions,
        metric=Metric(
            type="choice-share-difference", direction="condition1-minus-condition0", label=label
        ),
        format_shots=tuple(Shot(prompt=e.prompt, answer=e.answer) for e in format_shots),
        task_shots=tuple(task_shots),
    )


# The placeholders each text may use: anything else, an attribute ({noun.upper}) or an index
# included, would be a wrong prompt, not an error, once str.format had filled it.
PLACEHOLDERS = {
    "decoy": {"templates": {"count", "noun", "options"}, "option": {"label", "price", "quality"}},
    "certainty": {"templates": {"options"}, "option": {"label", "lottery"}},
    "belief": {"templates": {"premises", "conclusion"}},
}
STYLE_PLACEHOLDERS = {"lottery": {"prize", "chance", "rest"}, "certain": {"prize"}}


def _check_placeholders(text: str, allowed: set[str], path: Path, field: str) -> None:
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:
        raise _bad(
            f"the text cannot be filled in ({exc})",
            path,
            field,
            "write literal braces as {{ and }}",
        ) from None
    if names - allowed:
        raise _bad(
            f"unknown placeholder(s) {', '.join('{' + n + '}' for n in sorted(names - allowed))}",
            path,
            field,
            f"use only {', '.join('{' + n + '}' for n in sorted(allowed))}",
        )


def check_texts(spec: TemplatedJob, path: Path) -> None:
    for kind, fields in PLACEHOLDERS.items():
        for i, ds in enumerate(getattr(spec, kind)):
            for t, template in enumerate(ds.templates):
                _check_placeholders(
                    template.text, fields["templates"], path, f"{kind}[{i}].templates[{t}].text"
                )
            if "option" in fields:
                _check_placeholders(ds.option, fields["option"], path, f"{kind}[{i}].option")
            for k, style in enumerate(getattr(ds, "styles", [])):
                for name, allowed in STYLE_PLACEHOLDERS.items():
                    _check_placeholders(
                        getattr(style, name), allowed, path, f"{kind}[{i}].styles[{k}].{name}"
                    )


def job_from_templates(data: Any, path: Path, job_id: str) -> Job:
    spec: TemplatedJob = validate(TemplatedJob, data, path)
    check_texts(spec, path)
    experiments = []
    for kind, check, items, label in (
        ("decoy", check_decoy, generate.decoy_items, "decoy effect"),
        ("certainty", check_certainty, generate.certainty_items, "certainty effect"),
        ("belief", check_belief, generate.belief_items, "belief bias"),
    ):
        for i, ds in enumerate(getattr(spec, kind)):
            check(ds, path, f"{kind}[{i}]")
            where = f"{kind}[{i}]"
            generated = _generated(items(ds, spec.answer_instruction), path, where)
            task = generate.belief_task_shots(ds) if kind == "belief" else []
            experiments.append(
                _experiment(ds.slug, label, generated, spec.format_shots.get(kind, []), task)
            )
    slugs = [e.slug for e in experiments]
    if not experiments or len(set(slugs)) != len(slugs):
        raise _bad(
            "no datasets" if not experiments else "two datasets share a slug",
            path,
            "decoy/certainty/belief",
            "give at least one dataset, each its own slug",
        )
    return Job(
        id=job_id,
        title=spec.title,
        system_prompt=spec.system_prompt,
        min_samples=spec.samples,
        recommended_temperature=spec.temperature,
        experiments=tuple(experiments),
        kind=KIND,
    )

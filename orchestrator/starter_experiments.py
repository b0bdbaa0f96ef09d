"""`orchestrator init --experiment KIND`: a job file of one's own, in the benchmark format, for
each kind of answer (a choice, a number, a rating on a declared scale, free text that an
extractor model reads), and a campaign config that runs it on the simulated respondent.
These are the examples of docs/your-own-experiment.md, which the docs test runs as written."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError
from orchestrator.spec.checks import folder_problem

SYSTEM = "Answer the task directly. Return only the requested JSON object."
SYSTEM_WORDS = "Answer the task directly, in a sentence or two."


def _job(
    title: str, experiment: dict[str, Any], samples: int = 30, system: str = SYSTEM
) -> dict[str, Any]:
    return {
        "title": title,
        "protocol": {"systemPrompt": system, "minimumSamplesPerCondition": samples},
        "experiments": [experiment],
    }


PROGRAMS = ' Return JSON only: {"choice": "Program A"} or {"choice": "Program B"}.'
EXPERIMENTS: dict[str, dict[str, Any]] = {
    "choice": _job(
        "Gain and loss framing of one choice",
        {
            "experimentSlug": "program-framing",
            "biasSlug": "framing-effect",
            "metric": {
                "type": "choice-share-difference",
                "direction": "condition0-minus-condition1",
                "targetOption": "Program A",
                "label": "Share choosing the sure program: gain frame minus loss frame",
                "unit": "share",
            },
            "responseContract": {"type": "choice", "options": ["Program A", "Program B"]},
            "conditions": [
                {
                    "label": "Gain frame",
                    "prompt": "600 people are at risk. Program A saves 200 of them for sure. "
                    "Program B saves all 600 with probability 1/3 and nobody with probability "
                    "2/3. Which program do you choose?" + PROGRAMS,
                },
                {
                    "label": "Loss frame",
                    "prompt": "600 people are at risk. Under Program A, 400 of them die for "
                    "sure. Under Program B, nobody dies with probability 1/3 and all 600 die "
                    "with probability 2/3. Which program do you choose?" + PROGRAMS,
                },
            ],
        },
    ),
    "number": _job(
        "Anchoring on an irrelevant number",
        {
            "experimentSlug": "price-anchor",
            "biasSlug": "anchoring",
            "metric": {
                "type": "mean-difference",
                "direction": "condition0-minus-condition1",
                "label": "Estimate after a high anchor minus after a low anchor",
                "unit": "EUR",
            },
            "responseContract": {"type": "number"},
            "plausibleRange": [0, 100000],
            "conditions": [
                {
                    "label": "High anchor",
                    "prompt": "Is a used city bike worth more or less than 2,000 euros? What "
                    'is it worth, in euros? Return JSON only: {"value": number}.',
                },
                {
                    "label": "Low anchor",
                    "prompt": "Is a used city bike worth more or less than 50 euros? What is "
                    'it worth, in euros? Return JSON only: {"value": number}.',
                },
            ],
        },
    ),
    "rating": _job(
        "Attribute framing on a 1-10 rating",
        {
            "experimentSlug": "meat-framing",
            "biasSlug": "attribute-framing",
            "metric": {
                "type": "mean-difference",
                "direction": "condition0-minus-condition1",
                "label": "Appeal of 75% lean minus 25% fat",
                "unit": "rating points",
            },
            "responseContract": {"type": "rating", "minimum": 1, "maximum": 10},
            "conditions": [
                {
                    "label": "Lean frame",
                    "prompt": "Ground beef is labelled 75% lean. On a scale from 1 (very "
                    "unappealing) to 10 (very appealing), how appealing is it? Return JSON "
                    'only: {"value": integer}.',
                },
                {
                    "label": "Fat frame",
                    "prompt": "Ground beef is labelled 25% fat. On a scale from 1 (very "
                    "unappealing) to 10 (very appealing), how appealing is it? Return JSON "
                    'only: {"value": integer}.',
                },
            ],
        },
    ),
    "free-text": _job(
        "A planning estimate in the model's own words",
        {
            "experimentSlug": "thesis-planning",
            "biasSlug": "planning-fallacy",
            "metric": {
                "type": "mean-difference",
                "direction": "condition0-minus-condition1",
                "label": "Weeks estimated from the inside view minus with the outside view",
                "unit": "weeks",
            },
            "responseContract": {"type": "number"},
            "conditions": [
                {
                    "label": "Inside view",
                    "prompt": "A student plans the last chapter of a thesis: 40 pages, with "
                    "the data already collected. In a sentence or two, how many weeks will it "
                    "take?",
                },
                {
                    "label": "Outside view",
                    "prompt": "A student plans the last chapter of a thesis: 40 pages, with "
                    "the data already collected. Such chapters took other students 12 weeks "
                    "on average. In a sentence or two, how many weeks will it take?",
                },
            ],
        },
        system=SYSTEM_WORDS,
    ),
}

# The extractor reads a number out of a reply in words (the free-text kind needs one).
EXTRACTOR = """
[extractor]                     # states the answer when a reply holds no JSON
provider = "simulated"          # for a rehearsal; a small hosted model for real runs
name = "extractor"
limit = "extractor"
"""

CONFIG = """\
# A campaign running your own experiment ({file}) on the simulated respondent: a rehearsal of
# the whole pipeline, with no model and no key. Check the plan's `answer` column first:
#   orchestrator plan {config}
# then add your models (see `orchestrator init` for hosted and local examples).
name = "{name}"
jobs = ["{file}"]
samples = 30
output_dir = "runs"

[[models]]
provider = "simulated"
name = "sim-respondent"
{extractor}"""


def write_experiment(folder: Path, kind: str) -> tuple[list[Path], str | None]:
    """`KIND-experiment.json` in `folder`, and `campaign.toml` beside it when there is none:
    never over a file. The paths written, and what the user must add to a config that was
    there already (None when the config was written)."""
    if kind not in EXPERIMENTS:
        close = difflib.get_close_matches(kind, list(EXPERIMENTS), n=1)
        raise UserError(
            f"no experiment kind '{kind}'",
            field="--experiment",
            fix=(f"did you mean '{close[0]}'? " if close else "")
            + f"use one of: {', '.join(EXPERIMENTS)}",
        )
    if problem := folder_problem(folder):
        raise UserError(f"cannot write into {folder}: {problem}", fix="give another folder")
    job = folder / f"{kind}-experiment.json"
    config = folder / "campaign.toml"
    folder.mkdir(parents=True, exist_ok=True)
    written = [_new_file(job, json.dumps(EXPERIMENTS[kind], indent=2) + "\n")]
    if config.exists():  # the user's own: never rewritten, so they are told what to add
        extra = " and an [extractor] model" if kind == "free-text" else ""
        return written, (
            f"{config} exists and was left as it is, so it does not run {job.name} yet: add "
            f'"{job.name}" to its jobs{extra} (docs/your-own-experiment.md)'
        )
    text = CONFIG.format(
        file=job.name,
        config=config,
        name=f"my-{kind}",
        extractor=EXTRACTOR if kind == "free-text" else "",
    )
    written.append(_new_file(config, text))
    return written, None


def _new_file(path: Path, text: str) -> Path:
    try:
        with open(path, "x", encoding="utf-8") as f:  # "x": never over a file
            f.write(text)
    except FileExistsError:
        raise UserError(
            f"{path} already exists; init does not overwrite a file",
            fix=f"give another folder, or move {path} away",
        ) from None
    return path

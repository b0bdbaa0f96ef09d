"""The job format for templated datasets (`instructed-to-bias/1`), as pydantic models.

A dataset is text templates with placeholders, value grids, and the option orders to show; the
generators (generate.py) expand template x grid row x order x condition into items. Everything
a prompt says is in the file: the generators only compute decoy prices and qualities, the
control lotteries' scaled chances, and the option orders.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from orchestrator.spec.loading import Forbidding

FORMAT = "instructed-to-bias/1"
SLUG = r"^[a-z0-9-]+$"


class Template(Forbidding):
    id: str = Field(pattern=SLUG)
    text: str = Field(min_length=1)


class Decoy(Forbidding):
    """A decoy made from the target: its price raised by `price` (a fraction: 0.25 is +25%),
    its quality lowered by `quality` points."""

    price: float = Field(ge=0, le=1)
    quality: int = Field(ge=0, le=30)


class DecoyDataset(Forbidding):
    slug: str = Field(pattern=SLUG)
    product: str
    noun: str  # "phone brands": the template's {noun}
    label: str = "Brand"  # options are "<label> 1", "<label> 2", ...
    option: str = "{label} - price is ${price}, quality rating is {quality}."
    price_range: tuple[float, float]
    price_step: float = Field(gt=0)  # decoy prices are rounded to it (0.01, 1, 100, 1000)
    templates: list[Template] = Field(min_length=1)
    # (cheaper price, cheaper quality, expensive price, expensive quality)
    pairs: list[tuple[float, int, float, int]] = Field(min_length=1)
    decoys: list[Decoy] = Field(min_length=1)


class LotteryStyle(Forbidding):
    """How a lottery is written: `lottery` for a risky option ({prize}, {chance}, {rest}),
    `certain` for a sure one ({prize}); chances as percentages or probabilities."""

    id: str = Field(pattern=SLUG)
    chance: Literal["percent", "probability"]
    lottery: str
    certain: str
    conditions: list[Literal["control", "treatment"]] = ["control", "treatment"]


class Chance(Forbidding):
    risky: int = Field(gt=0, lt=100)  # the risky option's chance of its prize, in percent
    scale: float = Field(gt=0, lt=1)  # control: both options' chances times this


class CertaintyDataset(Forbidding):
    slug: str = Field(pattern=SLUG)
    label: str = "Option"  # options are "<label> A", "<label> B"
    option: str = "{label} - {lottery}."
    templates: list[Template] = Field(min_length=1)
    styles: list[LotteryStyle] = Field(min_length=1)
    prizes: list[tuple[int, int]] = Field(min_length=1)  # (risky prize, safe prize)
    chances: list[Chance] = Field(min_length=1)


class Terms(Forbidding):
    """One syllogism family: All {a} are {b}; the valid form adds All {b} are {c}, the invalid
    one Some {b} are {c}. Each form has a believable and an unbelievable {c}."""

    a: str
    b: str
    valid: tuple[str, str]  # (believable c, unbelievable c) for: All {a} are {c}
    invalid: tuple[str, str]  # (believable c, unbelievable c) for: Some {a} are {c}


class BeliefDataset(Forbidding):
    slug: str = Field(pattern=SLUG)
    templates: list[Template] = Field(min_length=1)  # {premises} and {conclusion}
    real: list[Terms] = Field(min_length=1)  # treatment: real-world terms
    invented: list[Terms] = Field(min_length=1)  # control: invented words, believability moot
    # Invented words for the task few-shot examples (generate.belief_task_shots): never in a test item (checked).
    few_shot_words: list[str] = []


class Example(Forbidding):
    """A format few-shot example: a neutral question of the dataset's form, and an answer."""

    prompt: str = Field(min_length=1)
    answer: str = Field(min_length=1)


class TemplatedJob(Forbidding):
    format: Literal["instructed-to-bias/1"]
    title: str = ""
    description: str = ""
    samples: int = Field(default=1, ge=1)
    temperature: float | None = None
    system_prompt: str = ""
    answer_instruction: str = Field(min_length=1)  # "{options}": the item's answer options
    decoy: list[DecoyDataset] = []
    certainty: list[CertaintyDataset] = []
    belief: list[BeliefDataset] = []
    # Format few-shot pools per kind of dataset (paper 6.1: arbitrary choices such as shirt
    # colours, and reasoning examples for belief bias); task few-shot examples for belief bias
    # are generated from each belief dataset's few_shot_words.
    format_shots: dict[Literal["decoy", "certainty", "belief"], list[Example]] = {}

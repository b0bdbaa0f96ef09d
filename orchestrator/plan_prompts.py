"""The prompts a plan's cells send: a chat model's messages (the job's or strategy's system
prompt, few-shot examples, the item, its options in their counterbalanced order and the answer
instruction) or a scoring model's plain text ending in the answer cue, and the continuations
its options are scored as."""

from __future__ import annotations

from orchestrator.spec.models import Experiment, Job, ResponseContract, Shot, Strategy, Variant

# How options a variant lets the planner present are shown (in a counterbalanced order).
CHOICE_INSTRUCTION = (
    "Give a brief justification, then end your answer with a JSON object naming "
    'your choice exactly as written above: {"choice": "<option>"}'
)


def choice_block(contract: ResponseContract, order: tuple[int, ...]) -> str:
    listed = "\n".join(f"- {contract.options[i]}" for i in order)
    return f"Options:\n{listed}\n\n{CHOICE_INSTRUCTION}"


def render_messages(
    job: Job,
    experiment: Experiment,
    variant: Variant,
    strategy: Strategy,
    order: tuple[int, ...] | None = None,
    shots: tuple[Shot, ...] = (),
) -> tuple[dict[str, str], ...]:
    system = _system(job, strategy)
    user = examples(shots) + variant.prompt
    if order is not None:
        user += "\n\n" + choice_block(variant.contract, order)
    if variant.instruction:
        user += "\n\n" + variant.instruction
    user += _suffix(experiment, strategy)
    messages = ({"role": "user", "content": user},)
    return ({"role": "system", "content": system}, *messages) if system else messages


def _system(job: Job, strategy: Strategy) -> str:
    return strategy.system_prompt if strategy.system_prompt is not None else job.system_prompt


def _suffix(experiment: Experiment, strategy: Strategy) -> str:
    if not strategy.user_suffix:
        return ""
    return "\n\n" + strategy.user_suffix.replace("{bias}", experiment.bias_label)


# What a scored prompt ends with, and the premise alone: DC-PMI compares each option's
# log-probability after the prompt with its log-probability after the premise (seed 004).
ANSWER_CUE = "Answer:"


def render_scoring(
    job: Job,
    experiment: Experiment,
    variant: Variant,
    strategy: Strategy,
    order: tuple[int, ...] | None = None,
    shots: tuple[Shot, ...] = (),
) -> tuple[dict[str, str], ...]:
    """The prompt of a model that answers by scoring: one plain text (no chat turns, which a
    pretrained model does not know), without the instruction on how to write an answer, ending
    in the answer cue; each option's log-probability is then read after it."""
    parts = [p for p in (_system(job, strategy), examples(shots) + variant.prompt) if p]
    if order is not None:
        parts.append("Options:\n" + "\n".join(f"- {variant.contract.options[i]}" for i in order))
    text = "\n\n".join(parts) + _suffix(experiment, strategy)
    return ({"role": "user", "content": f"{text}\n{ANSWER_CUE}"},)


def examples(shots: tuple[Shot, ...]) -> str:
    """Few-shot examples as the paper shows them: each question, then "Answer: <answer>"."""
    return "".join(f"{shot.prompt}\n{ANSWER_CUE} {shot.answer}\n\n" for shot in shots)


def candidates(contract: ResponseContract) -> tuple[str, ...]:
    """The continuations a scored prompt is read with: each option after a space."""
    return tuple(" " + option for option in contract.options)

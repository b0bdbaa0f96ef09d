"""A model named on the command line (`run --model`, `plan --model`, `audit --judge`), as the
config's [[models]] table it stands for: 'local' (the embedded SmolLM2, no key), 'simulated',
or PRESET/NAME, a preset of configs/presets.toml (its provider, base_url and key variable) and
the model's name, as Inspect and lm-evaluation-harness users write provider/model."""

from __future__ import annotations

from typing import Any

from orchestrator.errors import UserError

LOCAL_CONTEXT = 4096  # a judge's prompt (~800 tokens) + a long trace + the answer


def model_from_flag(spec: str, option: str, **settings: Any) -> dict[str, Any]:
    """The [[models]] table `spec` names; `settings` are added to it (temperature, ...)."""
    if spec == "local":
        return {"provider": "local", **settings, "server": {"n_ctx": LOCAL_CONTEXT}}
    if spec == "simulated":
        return {"provider": "simulated", "name": "simulated", **settings}
    preset, _, name = spec.partition("/")
    if not preset or not name:
        raise UserError(
            f"'{spec}' names no model",
            field=option,
            fix=f"use {option} local, {option} simulated, or {option} PRESET/NAME "
            "(e.g. openai/gpt-4o-mini; presets: configs/presets.toml)",
        )
    return {"preset": preset, "name": name, **settings}

"""The campaign config's models as the Python API names them: `Campaign` and `Model`, to build
or change a campaign in code (their fields: docs/config-reference.md), and `load_campaign`."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.spec.campaign import CampaignConfig, ModelConfig
from orchestrator.spec.loading import load_toml, user_error

PATHS = ("output_dir", "cache", "presets", "prices")  # the fields that name one file or folder


class Campaign(CampaignConfig):
    """A campaign: which jobs, on which models, how many samples, at what limits; the fields of
    a campaign config file (docs/config-reference.md), checked the same way.

        campaign = orchestrator.Campaign(
            name="quick",
            jobs=["paired"],
            models=[orchestrator.Model(provider="simulated", name="sim", temperature=1.0)],
            samples=10,
        )
        orchestrator.run(campaign)

    A field that is wrong raises `UserError` naming it, with a did-you-mean for a misspelt
    one. Relative paths of jobs, a model file or a cache file start from the current folder;
    in a campaign read by `load_campaign`, from the file's folder. `output_dir`, as on the
    command line, starts from the current folder. Change a field with
    `campaign.model_copy(update={"samples": 5})`.
    """

    def __init__(self, **fields: Any) -> None:
        for name in PATHS:  # a Path is as good as its text here; a config file holds text
            if isinstance(fields.get(name), PathLike):
                fields[name] = str(fields[name])
        if isinstance(fields.get("jobs"), list | tuple):
            fields["jobs"] = [str(j) if isinstance(j, PathLike) else j for j in fields["jobs"]]
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise user_error(CampaignConfig, exc) from None


class Model(ModelConfig):
    """A model of a campaign (a `[[models]]` table of a config file; its fields:
    docs/config-reference.md): `Model(provider="simulated", name="sim")`, `Model(provider="local")` (the
    embedded SmolLM2, no key), `Model(preset="openai", name="gpt-4o-mini")` (the key from
    $OPENAI_API_KEY, never from here). A field that is wrong raises `UserError`. A loaded
    campaign's models are of the base class, `ModelConfig`; both are accepted everywhere."""

    def __init__(self, **fields: Any) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise user_error(ModelConfig, exc) from None


def load_campaign(path: str | PathLike[str]) -> Campaign:
    """A campaign config file (TOML), checked whole as `orchestrator run` checks it (its jobs
    read, its models completed from the presets, nothing written), as the `Campaign` it holds,
    to change in code and run. Raises `UserError` naming the file, field and fix."""
    from orchestrator.api.starting import API_NAMES, check_table

    path = Path(path)
    raw = load_toml(path, "campaign config")
    check_table(raw, path, API_NAMES)
    campaign = Campaign.model_validate(raw)
    campaign._source = path.resolve()
    return campaign

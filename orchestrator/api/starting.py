"""What a run starts from, for the command line and the Python API alike: a campaign config
file, a campaign built in Python, or a run folder to resume, with the overrides that `run`'s
flags or `orchestrator.run`'s keywords give. A bad config raises here, before anything is
written."""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError
from orchestrator.spec.campaign import Campaign, CampaignConfig, ModelConfig
from orchestrator.spec.loading import load_toml

# The fields a run may be started with apart from its config, by the name each face gives them,
# and how each says "run this folder"
CLI_NAMES = {
    "samples": "--samples",
    "run_id": "--run-id",
    "models": "--model",
    "items": "--limit",
    "output_dir": "--output-dir",
    "run": "orchestrator run {}",
}
API_NAMES = {
    "samples": "samples",
    "run_id": "run_id",
    "models": "models",
    "items": "limit",
    "output_dir": "output_dir",
    "run": "orchestrator.run('{}')",
}

ModelGiven = str | ModelConfig | dict[str, Any]


def model_table(model: ModelGiven, name: str) -> dict[str, Any]:
    """A model as the config's [[models]] table: 'local', 'simulated' or PRESET/NAME as the
    command line names one, or a Model (its fields as given)."""
    from orchestrator.spec.model_flag import model_from_flag

    if isinstance(model, str):
        return model_from_flag(model, name)
    if isinstance(model, ModelConfig):
        return model.model_dump(exclude_unset=True)
    return dict(model)


def starting_campaign(
    target: str | PathLike[str] | CampaignConfig,
    overrides: dict[str, Any],
    names: dict[str, str],
) -> Campaign:
    """The campaign to run: `target` a config file (its overrides applied: one given wins over
    the file), a config built in Python (the same), or a run folder (resumed as it was started:
    no override may change it). `names`: how the caller names each override, for errors."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(target, CampaignConfig):
        return _from_table(target.model_dump(exclude_unset=True), target.source, given, names)
    path = Path(target)
    if path.name in ("results.ndjson", "manifest.json") and path.is_file():
        raise UserError(
            "this is a file of a run folder, not a campaign config",
            file=path,
            fix=f"give the run folder itself: {names['run'].format(path.parent)}",
        )
    if path.is_dir():  # a run folder: resume it where it is, as it was started
        from orchestrator.session import campaign_of_run

        for field in given:
            name = names[field]
            raise UserError(
                f"{name} cannot change a run that exists",
                field=name,
                fix=f"drop {name} to resume {path}, or give the campaign config instead of "
                "the run folder to start another run",
            )
        return campaign_of_run(path)
    return _from_table(load_toml(path, "campaign config"), path, given, names)


def _from_table(
    raw: dict[str, Any], path: Path | None, given: dict[str, Any], names: dict[str, str]
) -> Campaign:
    from orchestrator.session import campaign_from

    if "models" in given:
        given["models"] = [model_table(m, names["models"]) for m in given["models"]]
    return campaign_from(raw, path, given, flags=names)


def check_table(raw: dict[str, Any], path: Path | None, names: dict[str, str]) -> None:
    """Every check a run makes of a config's table before it writes anything."""
    _from_table(raw, path, {}, names)


def price_notes(campaign: Campaign) -> list[str]:
    """A note for each paid model with no price whose name is close to one the price table has
    (a misspelling, probably): estimated and budgeted at $0 otherwise."""
    from orchestrator.pricing import did_you_mean

    models = [*campaign.config.models, *(m for _, m in campaign.config.helpers())]
    return [
        f"model {m.label} has no price in the price table, so it is estimated at $0: "
        f"{did_you_mean(close)} (a name the provider does not know fails when run; a model it "
        "knows needs its price = {input = ..., output = ...})"
        for m in models
        if (close := campaign.close_prices.get(m.key))
    ]


Ask = Callable[[str], bool | None]  # a yes or no to a question; None: nobody can be asked


def check_received(
    campaign: Campaign,
    run_dir: Path,
    trust: bool,
    say: Callable[[str], None],
    note: Callable[[str], None],
    ask: Ask,
    trust_name: str = "--trust-endpoints",
) -> None:
    """What a resumed folder's manifest chooses for the user, checked (engine/endpoints.py):
    each endpoint it calls and the key variables it sends there are said; for a folder this
    user did not make, a key goes to a host that is not a provider's own only after a yes to
    `ask`, or `trust`; and its cache file's path (a file it would write) is not used."""
    from orchestrator.engine.endpoints import endpoints, made_here, seal_manifest
    from orchestrator.engine.store import RunStore

    for endpoint in endpoints(campaign):
        say(f"calls {endpoint.line()}")
    manifest = RunStore(run_dir).manifest_path.read_bytes()
    if made_here(run_dir, manifest):
        return
    if isinstance(campaign.config.cache, str):
        note(
            f"this run folder was not made by you: the cache file its manifest names "
            f"({campaign.config.cache}) is not used; your own cache folder's is"
        )
        campaign.config = campaign.config.model_copy(update={"cache": True})
    doubtful = [e for e in endpoints(campaign) if e.secrets and not e.official]
    if not doubtful:
        return
    if trust:  # trusted once, the folder is the user's: its manifest sealed as it is now
        seal_manifest(run_dir, manifest)
        return
    listed = "\n    ".join(e.line() for e in doubtful)
    what = (
        f"this run folder was not made by you (its manifest is not sealed by your key), and "
        f"resuming it sends your keys to hosts that are not a provider's own:\n    {listed}"
    )
    answer = ask(what)
    if answer:
        seal_manifest(run_dir, manifest)  # asked once: not again for this manifest
        return
    if answer is False:
        raise UserError("not resumed: no key was sent", file=run_dir)
    raise UserError(
        what,
        file=run_dir / "manifest.json",
        field="base_url",
        fix=f"check those URLs; if you trust them, run again with {trust_name}",
    )

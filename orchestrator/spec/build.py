"""Loading a campaign: its config validated, its models completed from the catalogues (presets,
prices) and pinned to their files, its jobs read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import UserError
from orchestrator.pricing import FREE_PROVIDERS, Price, close_names
from orchestrator.spec import localmodel
from orchestrator.spec.campaign import Campaign, CampaignConfig, LocalServerConfig, ModelConfig
from orchestrator.spec.catalog import (
    catalogue_path,
    load_batch_discounts,
    load_presets,
    load_prices,
)
from orchestrator.spec.checks import check_campaign
from orchestrator.spec.jobs import FORMER_NAMES, JobReader, load_job, resolve_job_path
from orchestrator.spec.loading import field_path, load_toml, validate
from orchestrator.spec.models import Job
from orchestrator.spec.secrets import redact
from orchestrator.spec.server import cluster_problems

# The command-line options that override config fields: a bad value is blamed on the flag.
FLAGS = {
    "samples": "--samples",
    "run_id": "--run-id",
    "models": "--model",
    "items": "--limit",
    "output_dir": "--output-dir",
}
# What `plan` says the source of (a flag, the config, or the default)
SOURCED = ("models", "samples", "items", "output_dir", "run_id")


def load_campaign(
    path: Path, overrides: dict[str, Any] | None = None, *, studies: Sequence[JobReader]
) -> Campaign:
    """A campaign config file, its jobs read by `studies` (orchestrator.session.load_campaign
    passes the registered studies)."""
    return campaign_from(load_toml(path, "campaign config"), path, overrides, studies=studies)


def campaign_from(
    raw: dict[str, Any],
    path: Path | None,
    overrides: dict[str, Any] | None = None,
    *,
    studies: Sequence[JobReader],
    flags: dict[str, str] | None = None,
) -> Campaign:
    """A campaign config's table (as read from `path`, or a config built in Python dumped as
    one, its relative paths taken from `path`'s folder or the current one), checked as a file
    is. `overrides`: fields given apart (command-line options; `flags` names each as the user
    gave it, so a bad value is blamed there)."""
    raw = dict(raw)
    flags = {**FLAGS, **(flags or {})}
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    written = set(raw)
    raw.update(given)
    config: CampaignConfig = validate(
        CampaignConfig, raw, path, flags={k: flags.get(k, f"--{k}") for k in given}
    )
    try:
        campaign = build_campaign(config, path, studies=studies)
    except UserError as exc:  # a model given by --model is the flag's fault, not the file's
        if "models" not in given or not (exc.field or "").startswith("models["):
            raise
        index = (exc.field or "").split("]")[0].removeprefix("models[")
        raise UserError(
            f"the {_ordinal(int(index) + 1)} model given: {exc.detail}",
            field=flags["models"],
            fix=exc.fix,
        ) from None
    campaign.flags = {k: flags.get(k, f"--{k}") for k in given}  # a bad value names its flag
    campaign.sources = {
        k: campaign.flags.get(k) or ("config" if k in written else "default") for k in SOURCED
    }
    check_campaign(campaign)  # what the user wrote; a run's manifest was checked when written
    campaign.close_prices = _close_prices(campaign.config, path.parent if path else Path.cwd())
    return campaign


def _close_prices(config: CampaignConfig, base: Path) -> dict[str, list[str]]:
    """For each paid model with no price, the names its price table has that are close to its
    own (by model key; only those with any)."""
    models = [*config.models, *(m for _, m in config.helpers())]
    unpriced = [m for m in models if m.price is None and m.provider not in FREE_PROVIDERS]
    if not unpriced:
        return {}
    priced = list(load_prices(config.prices, base))
    return {m.key: close for m in unpriced if m.name and (close := close_names(m.name, priced))}


def _resolve_local(model: ModelConfig, index: int, base: Path, path: Path | None) -> ModelConfig:
    """Pin a `local` model to its file: absolute path, name and sha256 (its real identity)."""
    server = model.server or LocalServerConfig()
    file, sha = localmodel.resolve(
        server.model_path, base, f"models[{index}].server.model_path", str(path) if path else None
    )
    return model.model_copy(
        update={
            # scoring reads every prompt token's log-probability, which llama.cpp keeps only so
            "server": server.model_copy(
                update={
                    "model_path": str(file),
                    "logits_all": server.logits_all or model.answers == "score",
                }
            ),
            "name": model.name or file.name.removesuffix(".gguf"),
            "version": model.version or f"sha256:{sha[:16]}",
            "model_sha256": sha,
        }
    )


def _with_catalogues(
    model: ModelConfig,
    where: tuple[Any, ...],
    presets: dict[str, Any],
    prices: dict[str, Price],
    discounts: dict[str, float],
    path: Path | None,
) -> ModelConfig:
    """The model with its preset's fields and its price; what the model sets itself wins."""
    if model.preset is not None:
        if model.preset not in presets:
            raise UserError(
                f"unknown preset '{redact(model.preset)}'",
                file=path,
                field=f"{field_path(where)}.preset",
                fix=f"use one of: {', '.join(presets)}",
            )
        given = model.model_dump(exclude_unset=True)
        preset = dict(presets[model.preset])
        if "base_urls" in given:  # the model's own pool of servers stands for the preset's one
            preset.pop("base_url", None)
        model = validate(ModelConfig, {**preset, **given}, path or Path("config"), where)
    if model.price is None and model.name in prices:
        model = model.model_copy(update={"price": prices[model.name]})
    discount = discounts.get(model.provider or "") if model.has_batch_api else None
    if model.batch_price is None and model.price is not None and discount is not None:
        model = model.model_copy(update={"batch_price": model.price.scaled(1 - discount)})
    return model


def apply_catalogues(config: CampaignConfig, base: Path, path: Path | None) -> CampaignConfig:
    """The models with their presets' fields and prices (a run's snapshot already has them)."""
    for field, ref in (("presets", config.presets), ("prices", config.prices)):
        if ref is not None and not (found := catalogue_path(ref, base)).is_file():
            raise UserError(
                f"{field} = {ref!r}: there is no file {found}",
                file=path,
                field=field,
                fix=f"give the path of a TOML file, relative to the config's folder ({base}), "
                f"or remove {field} to use the built-in one",
            )
    presets = load_presets(config.presets, base)
    prices, discounts = load_prices(config.prices, base), load_batch_discounts(config.prices, base)
    models = [
        _with_catalogues(m, ("models", i), presets, prices, discounts, path)
        for i, m in enumerate(config.models)
    ]
    helpers = {
        name: _with_catalogues(m, (name,), presets, prices, discounts, path)
        for name, m in config.helpers()
    }
    return config.model_copy(update={"models": models, **helpers})


def _load_job(
    ref: str,
    index: int,
    base: Path,
    path: Path | None,
    studies: Sequence[JobReader],
    output_dir: str | None = None,
) -> Job:
    try:
        path = resolve_job_path(ref, base, output_dir)
        job = load_job(path, studies)
        if ref in FORMER_NAMES and path.stem == FORMER_NAMES[ref]:  # the built-in, renamed
            job = job.model_copy(update={"id": ref})
        return job
    except UserError as exc:
        if exc.file is None:  # a bad reference, not a bad job file
            raise UserError(exc.detail, file=path, field=f"jobs[{index}]", fix=exc.fix) from None
        raise


def build_campaign(
    config: CampaignConfig,
    path: Path | None,
    jobs: list[Job] | None = None,
    *,
    studies: Sequence[JobReader] = (),
) -> Campaign:
    """Validate a config against its catalogues and load its jobs. Given `jobs` (a run folder's
    snapshot, or jobs its caller read), the models already hold their presets and prices."""
    base = path.parent if path else Path.cwd()
    if jobs is None:
        config = apply_catalogues(config, base, path)
        if isinstance(config.cache, str):  # the run's snapshot names the file wherever it resumes
            config = config.model_copy(
                update={"cache": str((base / Path(config.cache).expanduser()).resolve())}
            )
    named = [(f"models[{i}]", m) for i, m in enumerate(config.models)]
    named += config.helpers()
    for where, model in named:
        for field, problem, fix in model.problems():
            raise UserError(problem, file=path, field=f"{where}.{field}", fix=fix)
    on_ray = [
        (where, m.server)
        for where, m in named
        if m.provider == "local" and m.server is not None and m.server.backend == "ray"
    ]
    for field, problem, fix in cluster_problems(on_ray):
        raise UserError(problem, file=path, field=field, fix=fix)
    if any(m.provider == "local" for m in config.models):
        config = config.model_copy(
            update={
                "models": [
                    _resolve_local(m, i, base, path) if m.provider == "local" else m
                    for i, m in enumerate(config.models)
                ]
            }
        )
    keys = [m.key for m in config.models]  # the identity: two entries would share task ids
    for i, key in enumerate(keys):
        if keys.index(key) != i:
            raise UserError(
                f"model '{config.models[i].label}' is listed twice with the same settings",
                file=path,
                field=f"models[{i}]",
                fix="remove the duplicate entry",
            )
    if jobs is None:
        jobs = [
            _load_job(ref, i, base, path, studies, config.output_dir)
            for i, ref in enumerate(config.jobs)
        ]
    if len({j.id for j in jobs}) != len(jobs):
        raise UserError(
            "the same job is listed twice", file=path, field="jobs", fix="list each job once"
        )
    if config.strategies is not None:
        known = {s.id for j in jobs for s in j.strategies}
        unknown = sorted(set(config.strategies) - known)
        if unknown:
            raise UserError(
                f"unknown strategies {unknown}",
                file=path,
                field="strategies",
                fix=f"use ids the jobs define: {sorted(known)}",
            )
    return Campaign(config, jobs, path)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"

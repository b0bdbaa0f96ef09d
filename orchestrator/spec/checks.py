"""Checks across a campaign's parts: limit tables against the models, planted effects against the
jobs, and the output folder against the disk. Each refuses with a UserError before anything
is written."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import UserError
from orchestrator.spec.models import Job

if TYPE_CHECKING:
    from orchestrator.spec.campaign import Campaign, CampaignConfig


def check_campaign(campaign: Campaign) -> None:
    if "models" not in campaign.flags:  # the config's [limits] are for its own models, which
        check_limits(campaign.config, campaign.source)  # --model replaced: none is misnamed
    check_simulate(campaign.config, campaign.jobs, campaign.source)
    check_scoring(campaign.config, campaign.jobs, campaign.source)
    check_shots(campaign.config, campaign.jobs, campaign.source)
    check_output_dir(campaign)


def check_limits(config: CampaignConfig, path: Path | None) -> None:
    """Every [limits.X] table is some model's (or a helper's) limit key: a misnamed one
    would silently leave its models at the defaults."""
    models = [*config.models, *(m for _, m in config.helpers())]
    used = sorted({m.limit_key for m in models})
    note = (
        "; a model with a preset is paced under the preset's name"
        if any(m.preset for m in models)
        else ""
    )
    for name in config.limits:
        if name not in used:
            raise UserError(
                f"no model uses the limit key '{name}' (in use: {', '.join(used)}{note})",
                file=path,
                field=f"limits.{name}",
                fix=f"rename the table to a key in use ({', '.join(f'[limits.{k}]' for k in used)}), "
                f'or set limit = "{name}" on the models it is meant for',
            )


def check_simulate(config: CampaignConfig, jobs: list[Job], path: Path | None) -> None:
    """Planted effects name experiments (and variants) of the campaign's jobs: a misspelt slug
    would silently plant nothing."""
    experiments = {e.slug: e for job in jobs for e in job.experiments}
    for i, model in enumerate(config.models):
        for slug, answers in (model.simulate.effects if model.simulate else {}).items():
            where = f"models[{i}].simulate.effects.{slug}"
            if slug not in experiments:
                raise UserError(
                    f"no experiment '{slug}' in the campaign's jobs",
                    file=path,
                    field=where,
                    fix=f"use one of: {', '.join(experiments)}",
                )
            conditions = experiments[slug].conditions
            variants = {v.id for c in conditions for v in c.variants}
            for vid in answers.variants:
                if vid not in variants:
                    raise UserError(
                        f"experiment '{slug}' has no variant '{vid}'",
                        file=path,
                        field=f"{where}.variants.{vid}",
                        fix=f"use one of: {', '.join(sorted(variants))}",
                    )
            _check_conditions(answers, conditions, where, path)


def _check_conditions(answers, conditions, where: str, path: Path | None) -> None:
    """Each condition's planted answers fit that condition: no more conditions than the
    experiment has, and shares keyed by its options or their roles (a share keyed by
    "Programme B" for the option "Program B" would plant nothing, silently)."""
    lists = [("conditions", answers.conditions)]
    lists += [(f"variants.{vid}", given) for vid, given in answers.variants.items()]
    for name, given in lists:
        if len(given) > len(conditions):
            raise UserError(
                f"{len(given)} conditions given, but the experiment has {len(conditions)}",
                file=path,
                field=f"{where}.{name}",
                fix="give one entry per condition, in the experiment's order",
            )
        for i, (planted, condition) in enumerate(zip(given, conditions, strict=False)):
            known = {
                o for v in condition.variants for o in (*v.contract.options, *v.contract.roles)
            }
            for option in planted.shares:
                if option not in known:
                    close = difflib.get_close_matches(option, sorted(known), n=1)
                    hint = f"did you mean '{close[0]}'? " if close else ""
                    raise UserError(
                        f"condition {i} ('{condition.label}') has no option '{option}'",
                        file=path,
                        field=f"{where}.{name}[{i}].shares",
                        fix=f"{hint}key shares by one of: {', '.join(sorted(known)) or '(none: not a choice)'}",
                    )


def check_scoring(config: CampaignConfig, jobs: list[Job], path: Path | None) -> None:
    """A model that answers by scoring ranks a choice's options: it has no way to state a
    number, a rating or a judgment, so a campaign giving it one is refused, not half-run."""
    scorers = [i for i, m in enumerate(config.models) if m.answers == "score"]
    if not scorers:
        return
    for job in jobs:
        for exp in job.experiments:
            kinds = {v.contract.kind for c in exp.conditions for v in c.variants}
            if kinds - {"choice"}:
                raise UserError(
                    f"models[{scorers[0]}] answers by scoring option log-probabilities, "
                    f"but experiment '{exp.slug}' of job '{job.id}' asks for a "
                    f"{'/'.join(sorted(kinds - {'choice'}))}, not a choice",
                    file=path,
                    field=f"models[{scorers[0]}].answers",
                    fix="run that job with models that generate (answers = "
                    '"generate"), in a campaign of its own',
                )


def shot_pool(experiment, kind: str):
    """The examples an experiment's items draw few-shot examples from."""
    return (kind == "task" and experiment.task_shots) or experiment.format_shots


def check_shots(config: CampaignConfig, jobs: list[Job], path: Path | None) -> None:
    """`shots` asks for examples some job has, and no more than its pools hold."""
    if not config.shots:
        return
    experiments = [e for job in jobs for e in job.experiments]
    if config.shot_kind == "task" and not any(e.task_shots for e in experiments):
        raise UserError(
            'shot_kind = "task", but no job of the campaign has task examples',
            file=path,
            field="shot_kind",
            fix="give a belief dataset at least 3 few_shot_words (its task examples "
            'are built from them), or use shot_kind = "format"',
        )
    pools = {e.slug: shot_pool(e, config.shot_kind) for e in experiments}
    if not any(pools.values()):
        raise UserError(
            f"shots = {config.shots}, but no job of the campaign has few-shot examples",
            file=path,
            field="shots",
            fix="set shots = 0, or add a job with examples (instructed)",
        )
    for slug, pool in pools.items():
        if pool and len(pool) < config.shots:
            raise UserError(
                f"shots = {config.shots}, but experiment '{slug}' has only "
                f"{len(pool)} {config.shot_kind} examples",
                file=path,
                field="shots",
                fix=f"set shots to at most {len(pool)}",
            )


def folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot be written to (created if missing), or None. Creates nothing."""
    for part in (folder, *folder.parents):
        if part.exists() or part.is_symlink():  # a dangling link blocks mkdir too
            if not part.is_dir():
                return f"'{part}' is a file, not a folder"
            if not os.access(part, os.W_OK | os.X_OK):
                return f"'{part}' is not writable"
            return None
    return None


def check_output_dir(campaign: Campaign) -> None:
    """The run folder <output_dir>/<name>/<run_id> can be written, checked before anything is."""
    c = campaign.config
    folder = Path(c.output_dir) / c.name / c.run_id
    problem = folder_problem(folder)
    if problem:
        raise UserError(
            f"cannot create the run folder {folder}: {problem}",
            file=campaign.source,
            field="output_dir",
            fix="set output_dir to a folder you can write to (it is created if missing)",
        )

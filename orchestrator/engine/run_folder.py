"""A run folder's identity: where a campaign's run lives, the manifest written when it starts,
and the campaign rebuilt from that manifest alone (so a moved or copied folder resumes, and is
read, where it now is)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator import __version__
from orchestrator.engine.store import RunStore
from orchestrator.errors import UserError
from orchestrator.formats import FIELD, RUN_FORMAT
from orchestrator.plan import Plan
from orchestrator.spec.build import build_campaign
from orchestrator.spec.campaign import Campaign, CampaignConfig
from orchestrator.spec.jobs import JobReader
from orchestrator.spec.loading import validate
from orchestrator.spec.models import Job


def run_dir_for(campaign: Campaign) -> Path:
    if campaign.run_dir is not None:  # resumed by folder: wherever that folder now is
        return campaign.run_dir
    c = campaign.config
    return Path(c.output_dir) / c.name / c.run_id


def campaign_of_run(run_dir: Path, studies: Sequence[JobReader] = ()) -> Campaign:
    """The campaign a run folder was started with, from its manifest alone: its config snapshot
    and job definitions. `studies` read the job files of manifests written before they held
    the jobs themselves."""
    manifest = RunStore(run_dir).read_manifest()
    where = run_dir / "manifest.json"
    config = validate(CampaignConfig, manifest["config"], where)
    # older manifests hold no jobs: the studies read the job files again
    jobs = (
        None
        if "jobs" not in manifest and studies
        else list(manifest_jobs(manifest, run_dir).values())
    )
    source = Path(manifest["configPath"]) if manifest.get("configPath") else None
    campaign = build_campaign(
        config, source if source and source.exists() else None, jobs, studies=studies
    )
    campaign.run_dir = run_dir
    campaign.nightly = bool(manifest.get("namedByDate"))
    return campaign


def manifest_jobs(manifest: dict[str, Any], run_dir: Path) -> dict[str, Job]:
    """The job definitions a run's manifest holds, validated; refused for a manifest from before
    manifests held them."""
    where = run_dir / "manifest.json"
    if "jobs" not in manifest:
        raise UserError(
            "this run's manifest has no job definitions (made by an older version)",
            file=str(where),
            fix="re-run the campaign with this version",
        )
    return {k: validate(Job, v, where, ("jobs", k)) for k, v in manifest["jobs"].items()}


def manifest_for(campaign: Campaign, plan: Plan) -> dict[str, Any]:
    return {
        "campaign": campaign.config.name,
        "runId": campaign.config.run_id,
        "createdAt": datetime.now(UTC).isoformat(),
        "software": __version__,
        FIELD: RUN_FORMAT,
        "configPath": str(campaign.source.resolve()) if campaign.source else None,
        "config": campaign.config.model_dump(mode="json"),
        "plan": plan.fingerprint(),
        # The job definitions themselves, so analysis never depends on files that may move.
        "jobs": {job.id: job.model_dump(mode="json") for job in campaign.jobs},
        "models": {m.key: m.label for m in campaign.config.models},
        # only when set, so other manifests stay as they were
        **({"namedByDate": True} if campaign.nightly else {}),
    }

"""Export in the AI Judge History study's own result JSON, one document per job and model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from orchestrator.engine.files import write_file
from orchestrator.engine.names import model_key, plain
from orchestrator.engine.results import RESULTS
from orchestrator.engine.store import RunStore
from orchestrator.export import final_records, jobs_of_kind

CONDITIONS = ("blind", "history-framing", "history-anchor")


def export_judge_history(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """One JSON per model run in the AI Judge History study's own result format: every valid
    judgment with its task, condition, repetition, score, verdict and reason."""
    manifest = RunStore(run_dir).read_manifest()
    jobs = jobs_of_kind(manifest, "judge-history")
    path = run_dir / RESULTS
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for _, status, _, _, rec in final_records(path, jobs):  # the log checked: nothing written
        if status == "ok":
            _add_judgment(runs, jobs, manifest, rec, path)
    counts = {}
    for (job_id, key), doc in runs.items():
        doc["judgments"].sort(
            key=lambda j: (j["taskId"], CONDITIONS.index(j["condition"]), j["repetition"])
        )
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
        out = write_file(out_dir / f"{job_id}__{key}.json", data, within=out_dir)
        counts[out] = len(doc["judgments"])
    return counts


def _add_judgment(
    runs: dict[tuple[str, str], dict[str, Any]],
    jobs: dict[str, dict[str, Any]],
    manifest: dict[str, Any],
    rec: dict[str, Any],
    path: Path,
) -> None:
    job, model = jobs[rec["job"]], rec["model"]
    where = str(path)
    names = (plain(rec["job"], where, "job"), model_key(rec["modelKey"], where))
    doc = runs.setdefault(
        names,
        {
            "studyId": job["study_id"],
            "specVersion": job["spec_version"],
            "runId": f"{manifest['campaign']}/{manifest['runId']}/{rec['modelKey']}",
            "recordedAt": rec["finishedAt"],
            "model": {
                "provider": model["provider"],
                "name": model["name"],
                "version": model["version"],
                "temperature": model["temperature"],
                "topP": model["topP"],
                "maxTokens": model["maxTokens"],
                "seed": model["seed"],
                "structuredOutput": model.get("structuredOutput", False),
                "freshContextPerJudgment": True,
            },
            "judgments": [],
        },
    )
    doc["recordedAt"] = max(doc["recordedAt"], rec["finishedAt"])
    r = rec["response"]
    doc["judgments"].append(
        {
            "taskId": rec["experimentSlug"],
            "condition": CONDITIONS[rec["conditionIndex"]],
            "repetition": rec["sample"],
            "score": r["value"],
            "verdict": r["choice"],
            "reason": r.get("reason", ""),
        }
    )

"""Export of results in the published AI Bias Benchmark record format, one file per model."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from orchestrator.engine.store import iter_records

SCHEMA_MODEL_FIELDS = ("provider", "name", "version", "temperature", "topP", "date")


def to_benchmark_record(rec: dict[str, Any]) -> dict[str, Any]:
    """Only the schema's fields: it allows no extra top-level keys."""
    response = {k: rec["response"][k] for k in ("value", "choice", "raw") if k in rec["response"]}
    return {"caseId": rec["caseId"], "experimentSlug": rec["experimentSlug"],
            "conditionIndex": rec["conditionIndex"], "sample": rec["sample"],
            "model": {k: rec["model"][k] for k in SCHEMA_MODEL_FIELDS},
            "response": response or {"raw": ""}}


def _file_name(rec: dict[str, Any]) -> str:
    label = f"{rec['model']['provider']}__{rec['model']['name']}"
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '-', label)}__{rec['modelKey']}.ndjson"


def _jobs_of_kind(run_dir: Path, kind: str) -> dict[str, dict[str, Any]]:
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    return {k: v for k, v in manifest.get("jobs", {}).items() if v.get("kind", "paired") == kind}


def export_ai_benchmark(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """Write the answered records (ok, parse_error, refused) of seed-000-format jobs; `failed`
    and `rejected` ones hold no response of the model."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = _jobs_of_kind(run_dir, "paired")
    rows: dict[Path, list[dict[str, Any]]] = {}
    for rec in iter_records(run_dir / "results.ndjson"):
        if rec["status"] in ("failed", "rejected") or rec["job"] not in jobs:
            continue
        rows.setdefault(out_dir / _file_name(rec), []).append(rec)
    counts = {}
    for path, recs in rows.items():
        recs.sort(key=lambda r: (r["experimentSlug"], r["conditionIndex"], r["variant"],
                                 r["strategy"], r["sample"]))
        with open(path, "wb") as f:
            for rec in recs:
                f.write(orjson.dumps(to_benchmark_record(rec), option=orjson.OPT_APPEND_NEWLINE))
        counts[path] = len(recs)
    return counts


def export_judge_history(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """One JSON per model run in the AI Judge History study's own result format: every valid
    judgment with its task, condition, repetition, score, verdict and reason."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    jobs = _jobs_of_kind(run_dir, "judge-history")
    conditions = ("blind", "history-framing", "history-anchor")
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in iter_records(run_dir / "results.ndjson"):
        if rec["status"] != "ok" or rec["job"] not in jobs:
            continue
        job, model = jobs[rec["job"]], rec["model"]
        doc = runs.setdefault((rec["job"], rec["modelKey"]), {
            "studyId": job["study_id"], "specVersion": job["spec_version"],
            "runId": f"{manifest['campaign']}/{manifest['runId']}/{rec['modelKey']}",
            "recordedAt": rec["finishedAt"],
            "model": {"provider": model["provider"], "name": model["name"], "version": model["version"],
                      "temperature": model["temperature"], "topP": model["topP"],
                      "maxTokens": model["maxTokens"], "seed": model["seed"],
                      "structuredOutput": model.get("structuredOutput", False),
                      "freshContextPerJudgment": True},
            "judgments": []})
        doc["recordedAt"] = max(doc["recordedAt"], rec["finishedAt"])
        r = rec["response"]
        doc["judgments"].append({"taskId": rec["experimentSlug"], "condition": conditions[rec["conditionIndex"]],
                                 "repetition": rec["sample"], "score": r["value"], "verdict": r["choice"],
                                 "reason": r.get("reason", "")})
    counts = {}
    for (job_id, model_key), doc in runs.items():
        doc["judgments"].sort(key=lambda j: (j["taskId"], conditions.index(j["condition"]), j["repetition"]))
        path = out_dir / f"{job_id}__{model_key}.json"
        path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        counts[path] = len(doc["judgments"])
    return counts

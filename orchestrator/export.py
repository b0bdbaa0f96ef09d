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


def export_ai_benchmark(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """Write the terminal records (ok, parse_error, refused) of seed-000-format jobs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: dict[Path, list[dict[str, Any]]] = {}
    for rec in iter_records(run_dir / "results.ndjson"):
        if rec["status"] == "failed" or rec["conditionIndex"] not in (0, 1):
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

"""Export of results in the published AI Bias Benchmark record format, one file per model.

Two passes, so that a run of any size exports in bounded memory: the first reads every line
(checked by results.ResultLines) and keeps, per exported record, only where its line is and
what it sorts by; the second reads the records again in their sorted order and writes them.
A task's final record is its first terminal one (ok, parse_error, refused, too_long); `failed`
and `too_long` lines are never exported.
"""
from __future__ import annotations

import mmap
import re
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from orchestrator.engine.results import RESULTS, ResultLines, unparsable
from orchestrator.engine.store import RunStore
from orchestrator.errors import UserError

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


def _jobs_of_kind(manifest: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in manifest.get("jobs", {}).items() if v.get("kind", "paired") == kind}


def _records(path: Path, terminal_only: bool) -> Iterator[tuple[str, str, int, int, dict[str, Any]]]:
    """(taskId, status, offset, length, record) of every line (or every terminal one), parsed;
    the file is checked as it is read, and refused (UserError) at the end if a line is not a
    record, before anything is written."""
    lines = ResultLines(path)
    for task_id, status, _, offset, line in lines.records():
        if not (terminal_only and status == "failed"):
            yield task_id, status, offset, len(line), _parse(path, line)
    lines.check()


def _parse(path: Path, line: bytes) -> dict[str, Any]:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:  # passed the cheap check: a record glued to a torn line
        raise unparsable(path) or UserError(f"a line of {path} is not JSON", file=str(path)) from None


class _Index:
    """Where one output file's records are, and what they sort by, in flat arrays."""

    def __init__(self) -> None:
        self.cells, self.samples, self.offsets, self.lengths = array("q"), array("q"), array("q"), array("q")

    def add(self, cell: int, sample: int, offset: int, length: int) -> None:
        self.cells.append(cell)
        self.samples.append(sample)
        self.offsets.append(offset)
        self.lengths.append(length)

    def order(self, rank: np.ndarray) -> np.ndarray:
        """Sorted by (experiment, condition, variant, strategy, sample), ties in file order."""
        return np.lexsort((np.frombuffer(self.samples, np.int64),
                           rank[np.frombuffer(self.cells, np.int64)]))


def export_ai_benchmark(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """Write the answered records (ok, parse_error, refused) of seed-000-format jobs; `failed`
    and `too_long` ones hold no response of the model."""
    jobs = _jobs_of_kind(RunStore(run_dir).read_manifest(), "paired")
    path = run_dir / RESULTS
    indexes: dict[str, _Index] = {}
    cells: dict[tuple[Any, ...], int] = {}  # (experiment, condition, variant, strategy) -> id
    for _, status, offset, length, rec in _records(path, terminal_only=True):
        if rec["job"] in jobs and status != "too_long":
            cell = cells.setdefault((rec["experimentSlug"], rec["conditionIndex"], rec["variant"],
                                     rec["strategy"]), len(cells))
            indexes.setdefault(_file_name(rec), _Index()).add(cell, rec["sample"], offset, length)
    rank = np.empty(len(cells), np.int64)
    rank[[cells[c] for c in sorted(cells)]] = np.arange(len(cells))
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    with _mapped(path) as data:
        for name, index in indexes.items():
            counts[out_dir / name] = _write_sorted(out_dir / name, data, index, rank)
    return counts


def _write_sorted(out: Path, data: mmap.mmap, index: _Index, rank: np.ndarray) -> int:
    written, key, seen = 0, None, set()
    with open(out, "wb") as f:
        for i in index.order(rank).tolist():
            at = index.offsets[i]
            rec = orjson.loads(data[at:at + index.lengths[i]])
            if (index.cells[i], index.samples[i]) != key:  # a task's copies sort next to each other
                key, seen = (index.cells[i], index.samples[i]), set()
            if rec["taskId"] in seen:  # a second terminal record of a task (pre-lock runs)
                continue
            seen.add(rec["taskId"])
            f.write(orjson.dumps(to_benchmark_record(rec), option=orjson.OPT_APPEND_NEWLINE))
            written += 1
    return written


class _mapped:
    """The results file memory-mapped for reading (records are read back by offset)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "rb")
        size = self._file.seek(0, 2)
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else None

    def __enter__(self) -> mmap.mmap:
        return self._map

    def __exit__(self, *exc: object) -> None:
        if self._map is not None:
            self._map.close()
        self._file.close()


CONDITIONS = ("blind", "history-framing", "history-anchor")


def export_judge_history(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """One JSON per model run in the AI Judge History study's own result format: every valid
    judgment with its task, condition, repetition, score, verdict and reason. Keeps where each
    judge task's final record is, not the record, until the documents are written."""
    manifest = RunStore(run_dir).read_manifest()
    jobs = _jobs_of_kind(manifest, "judge-history")
    path = run_dir / RESULTS
    final: dict[str, tuple[int, int, str]] = {}  # task id -> (offset, length, status), first seen first
    for task_id, status, offset, length, rec in _records(path, terminal_only=False):
        if rec["job"] in jobs and final.get(task_id, (0, 0, "failed"))[2] == "failed":
            final[task_id] = (offset, length, status)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    with _mapped(path) as data:
        for offset, length, status in final.values():
            if status == "ok":
                _add_judgment(runs, jobs, manifest, orjson.loads(data[offset:offset + length]))
    counts = {}
    for (job_id, model_key), doc in runs.items():
        doc["judgments"].sort(key=lambda j: (j["taskId"], CONDITIONS.index(j["condition"]), j["repetition"]))
        out = out_dir / f"{job_id}__{model_key}.json"
        out.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        counts[out] = len(doc["judgments"])
    return counts


def _add_judgment(runs: dict[tuple[str, str], dict[str, Any]], jobs: dict[str, dict[str, Any]],
                  manifest: dict[str, Any], rec: dict[str, Any]) -> None:
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
    doc["judgments"].append({"taskId": rec["experimentSlug"], "condition": CONDITIONS[rec["conditionIndex"]],
                             "repetition": rec["sample"], "score": r["value"], "verdict": r["choice"],
                             "reason": r.get("reason", "")})

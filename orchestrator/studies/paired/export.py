"""Export in the published AI Bias Benchmark record format, one file per model identity, the
records sorted by experiment, condition, variant, strategy and sample (byte-identical for the
same run, whatever the order its lines were written in)."""

from __future__ import annotations

import mmap
import re
from array import array
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from orchestrator.engine.files import write_file
from orchestrator.engine.names import model_key
from orchestrator.engine.results import RESULTS
from orchestrator.engine.store import RunStore
from orchestrator.export import final_records, jobs_of_kind, mapped

SCHEMA_MODEL_FIELDS = ("provider", "name", "version", "temperature", "topP", "date")


def to_benchmark_record(rec: dict[str, Any]) -> dict[str, Any]:
    """Only the schema's fields: it allows no extra top-level keys."""
    response = {k: rec["response"][k] for k in ("value", "choice", "raw") if k in rec["response"]}
    return {
        "caseId": rec["caseId"],
        "experimentSlug": rec["experimentSlug"],
        "conditionIndex": rec["conditionIndex"],
        "sample": rec["sample"],
        "model": {k: rec["model"][k] for k in SCHEMA_MODEL_FIELDS},
        "response": response or {"raw": ""},
    }


def _file_name(rec: dict[str, Any], path: Path) -> str:
    label = f"{rec['model']['provider']}__{rec['model']['name']}"
    return (
        f"{re.sub(r'[^A-Za-z0-9._-]+', '-', label)}__{model_key(rec['modelKey'], str(path))}.ndjson"
    )


class _Index:
    """Where one output file's records are, and what they sort by, in flat arrays."""

    def __init__(self) -> None:
        self.cells, self.samples, self.offsets, self.lengths = (
            array("q"),
            array("q"),
            array("q"),
            array("q"),
        )

    def add(self, cell: int, sample: int, offset: int, length: int) -> None:
        self.cells.append(cell)
        self.samples.append(sample)
        self.offsets.append(offset)
        self.lengths.append(length)

    def order(self, rank: np.ndarray) -> np.ndarray:
        """Sorted by (experiment, condition, variant, strategy, sample), ties in file order."""
        return np.lexsort(
            (np.frombuffer(self.samples, np.int64), rank[np.frombuffer(self.cells, np.int64)])
        )


def export_ai_benchmark(run_dir: Path, out_dir: Path) -> dict[Path, int]:
    """Write the answered records (ok, parse_error, refused) of seed-000-format jobs; `failed`
    and `too_long` ones hold no response of the model."""
    jobs = jobs_of_kind(RunStore(run_dir).read_manifest(), "paired")
    path = run_dir / RESULTS
    indexes: dict[str, _Index] = {}
    cells: dict[tuple[Any, ...], int] = {}  # (experiment, condition, variant, strategy) -> id
    for _, status, offset, length, rec in final_records(path, jobs):
        if status not in ("failed", "too_long"):
            cell = cells.setdefault(
                (rec["experimentSlug"], rec["conditionIndex"], rec["variant"], rec["strategy"]),
                len(cells),
            )
            indexes.setdefault(_file_name(rec, path), _Index()).add(
                cell, rec["sample"], offset, length
            )
    rank = np.empty(len(cells), np.int64)
    rank[[cells[c] for c in sorted(cells)]] = np.arange(len(cells))
    counts: dict[Path, int] = {}
    written: dict[str, int] = {}
    with mapped(path) as data:
        for name, index in indexes.items():
            write = partial(_write_sorted, data, index, rank, written, name)
            out = write_file(out_dir / name, write, within=out_dir)
            counts[out] = written[name]
    return counts


def _write_sorted(
    data: mmap.mmap, index: _Index, rank: np.ndarray, counts: dict[str, int], name: str, f: BinaryIO
) -> None:
    """The file's records into `f`, sorted; how many in counts[name]."""
    written, key, seen = 0, None, set()
    for i in index.order(rank).tolist():
        at = index.offsets[i]
        rec = orjson.loads(data[at : at + index.lengths[i]])
        if (index.cells[i], index.samples[i]) != key:  # a task's copies sort next to each other
            key, seen = (index.cells[i], index.samples[i]), set()
        if rec["taskId"] in seen:  # a second terminal record of a task (pre-lock runs)
            continue
        seen.add(rec["taskId"])
        f.write(orjson.dumps(to_benchmark_record(rec), option=orjson.OPT_APPEND_NEWLINE))
        written += 1
    counts[name] = written

"""What the viewer reads of a run: one compact polars frame of every task's final record (the
columns the listing, its filters and its counts need), loaded once per state of the results
file (size, mtime) and again when a run still going appends to it; filters and pages run over
that frame, so a million records answer a page in milliseconds. A record itself is read from
the file at its byte offset (one line parsed), its messages from the plan (cells.py)."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from orchestrator.engine.columnar import records
from orchestrator.engine.prefix import edges
from orchestrator.engine.results import RESULTS, ResultLines, check_results_path
from orchestrator.engine.run_folder import manifest_jobs
from orchestrator.engine.store import RunStore
from orchestrator.errors import UserError
from orchestrator.spec.identity import identity_key
from orchestrator.spec.models import Job
from orchestrator.studies import registered
from orchestrator.viewer import listing
from orchestrator.viewer.cells import CELL_FIELDS, Cells

FILTERS = {
    "study": "study",
    "experiment": "experimentSlug",
    "condition": "conditionIndex",
    "variant": "variant",
    "strategy": "strategy",
    "model": "modelKey",
    "status": "status",
}
ROW = [
    "taskId",
    "study",
    "experiment",
    "condition",
    "conditionLabel",
    "variant",
    "strategy",
    "modelKey",
    "model",
    "status",
    "answer",
    "raw",
    "latencyMs",
    "costUsd",
]
MAX_SIZE = 500
# A growing file is read again at most every RELOAD_EVERY times as long as its last read took,
# and at most once a RELOAD_MIN_S: a run appending must not keep the viewer reading.
RELOAD_EVERY, RELOAD_MIN_S = 3.0, 1.0


class NotFound(UserError):
    """An unknown task, effect or page: 404."""


def file_state(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return (-1, 0)
    return (st.st_size, st.st_mtime_ns)


DETAIL_CHARS = 1 << 20  # what of one text a result's page sends at a time (?part=N)


@dataclass
class Loaded:
    state: tuple[int, int]
    frame: pl.DataFrame  # one row per task's final record
    spend: dict[str, float]  # per model, over every line: a superseded attempt was paid for too
    note: str | None
    covered: int = 0  # the log's bytes read into it
    log: tuple[tuple[int, ...], bytes] = ((), b"")  # that log's identity and edges (prefix.py)


@dataclass
class RunData:
    path: Path
    manifest: dict[str, Any]
    jobs: dict[str, Job]
    cells: Cells
    _loaded: Loaded | None = None
    _cache: dict[str, tuple[Any, float, Any]] = field(default_factory=dict)
    _next_load: float = 0.0  # monotonic time before which a changed file is not read again
    _lock: threading.Lock = field(default_factory=threading.Lock)  # the frame's
    _cache_lock: threading.Lock = field(default_factory=threading.Lock)  # the rest's: a slow
    # summary (the effects) never holds up a page

    @classmethod
    def open(cls, path: Path) -> RunData:
        """A run folder, refused (UserError) when it is not one: nothing is written."""
        manifest = RunStore(path).read_manifest()
        jobs = manifest_jobs(manifest, path)
        check_results_path(path / RESULTS)
        return cls(path, manifest, jobs, Cells(path))

    @property
    def results(self) -> Path:
        return self.path / RESULTS

    @property
    def study_of(self) -> dict[str, str]:
        kinds = {s.kind for s in registered()}
        return {job_id: job.kind for job_id, job in self.jobs.items() if job.kind in kinds}

    @property
    def labels(self) -> dict[tuple[str, int], str]:
        return {
            (e.slug, c.index): c.label
            for job in self.jobs.values()
            for e in job.experiments
            for c in e.conditions
        }

    def loaded(self) -> Loaded:
        """The frame for the file as it is now: read again when it changed, but while a run
        appends at most once per RELOAD_EVERY reads' worth of time (a 1M-record file takes
        seconds to read), serving the last frame in between."""
        with self._lock:
            state = file_state(self.results)
            if self._loaded is None or (
                self._loaded.state != state and time.monotonic() >= self._next_load
            ):
                started = time.monotonic()
                self._loaded = self._load(state)
                took = time.monotonic() - started
                self._next_load = time.monotonic() + max(RELOAD_MIN_S, RELOAD_EVERY * took)
            return self._loaded

    def _load(self, state: tuple[int, int]) -> Loaded:
        if state[0] <= 0:
            ResultLines(self.results).scan()  # a folder in its place is an error
            return Loaded(state, listing.empty(), {}, None)
        found = records(self.results, again=True)  # the log is read only where it grew
        last = self._loaded
        if (
            last is not None
            and not found.whole
            and 0 < last.covered <= found.complete_bytes
            and last.log == (found.identity, edges(self.results, last.covered))
        ):  # the same log, grown: not replaced, cut or rewritten at either end since
            # the log the frame was read from, with lines appended: only those are read (from
            # the snapshot or the log), and the final-record rule runs over the frame's rows
            # and theirs, which gives what it gives over every line (a task's first terminal
            # record, or its last failed one, is among them)
            chunks = [listing.read(found.frame.filter(pl.col("offset") >= last.covered))]
            frames, spend = [last.frame], dict(last.spend)
        else:
            chunks, frames, spend = listing.read_whole(found), [], {}
        for chunk in chunks:  # a piece at a time: a column added to a million rows at once
            for key, cost in listing.spend(chunk).items():  # held 200 MB more
                spend[key] = spend.get(key, 0.0) + cost
            frames.append(self._with_cells(self._with_study(chunk)))
        df = pl.concat(frames) if frames else listing.empty()
        df = df.filter(listing.final_lines(df))  # duplicates and superseded attempts counted once
        log = (found.identity, edges(self.results, found.complete_bytes))
        return Loaded(state, df, spend, found.note(), found.complete_bytes, log)

    def _with_study(self, df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(
            study=pl.col("job").replace_strict(self.study_of, default=None, return_dtype=pl.String)
        )

    def _with_cells(self, df: pl.DataFrame) -> pl.DataFrame:
        """Each record's cell id, looked up by a hash of its cell fields: a join on the seven
        fields themselves held 400 MB more for a million records. Should two cells' fields
        ever hash alike, or the two sides' fields differ in type (hashes would then differ
        where the values agree), the join it is."""
        table = self.cells.table()
        key = pl.struct(CELL_FIELDS).hash()
        hashes = table.select(key)[:, 0]
        same_types = df.select(CELL_FIELDS).schema == table.select(CELL_FIELDS).schema
        if not same_types or hashes.n_unique() < table.height:
            return df.join(
                table, on=CELL_FIELDS, how="left", nulls_equal=True, maintain_order="left"
            )
        return df.with_columns(
            cell=key.replace_strict(hashes, table["cell"], default=None, return_dtype=pl.UInt32)
        )

    def cached(self, name: str, compute, every_s: float = 0.0):
        """compute() once per state of the results file; while a run appends to it, at most
        once every `every_s` seconds (the value before is kept meanwhile)."""
        with self._cache_lock:
            state = file_state(self.results)
            hit = self._cache.get(name)
            if hit is None or (hit[0] != state and time.monotonic() - hit[1] >= every_s):
                hit = (state, time.monotonic(), compute())
                self._cache[name] = hit
            return hit[2]

    # --- listing -------------------------------------------------------------------------

    def where(self, params: dict[str, str]) -> pl.DataFrame:
        """The final records the filters keep (every filter optional; q: free text)."""
        df = self.loaded().frame
        exprs = []
        for name, column in FILTERS.items():
            value = params.get(name)
            if value in (None, ""):
                continue
            if name == "condition":
                value = _int(value, "condition")
            exprs.append(pl.col(column) == value)
        if exprs:
            df = df.filter(*exprs)
        q = (params.get("q") or "").strip()
        if q:
            in_raw = pl.col("raw").str.contains(f"(?i){re.escape(q)}")
            in_prompt = pl.col("cell").is_in(self.cells.matching(q))
            df = df.filter(in_raw.fill_null(False) | in_prompt.fill_null(False))
        return df

    def rows(self, df: pl.DataFrame) -> list[dict[str, Any]]:
        labels, names = self.labels, self.names
        out = []
        for r in df.iter_rows(named=True):
            raw = r["raw"]
            out.append(
                {
                    "taskId": r["taskId"],
                    "study": r["study"],
                    "experiment": r["experimentSlug"],
                    "condition": r["conditionIndex"],
                    "conditionLabel": labels.get((r["experimentSlug"], r["conditionIndex"])),
                    "variant": r["variant"],
                    "strategy": r["strategy"],
                    "modelKey": r["modelKey"],
                    "model": names.get(r["modelKey"], r["modelKey"]),
                    "status": r["status"],
                    "answer": r["answer"],
                    "raw": raw[:200] if raw is not None else None,
                    "latencyMs": r["latencyMs"],
                    "costUsd": r["costUsd"],
                }
            )
        return out

    def answers(self, params: dict[str, str]) -> dict[str, Any]:
        page = _int(params.get("page") or "1", "page", low=1, high=10**9)
        size = _int(params.get("size") or "50", "size", low=1, high=MAX_SIZE)
        df = self.where(params)
        return {
            "total": df.height,
            "page": page,
            "size": size,
            "rows": self.rows(df.slice((page - 1) * size, size)),
        }

    @property
    def names(self) -> dict[str, str]:
        from orchestrator.analysis.names import model_names

        return model_names(self.manifest)

    def facets(self) -> dict[str, Any]:
        df = self.loaded().frame
        labels = self.labels

        def values(column: str) -> list[Any]:
            return sorted(df[column].drop_nulls().unique().to_list())

        conditions = (
            df.select("experimentSlug", "conditionIndex")
            .unique()
            .sort("experimentSlug", "conditionIndex")
        )
        return {
            "study": values("study"),
            "experiment": values("experimentSlug"),
            "condition": [
                {"experiment": e, "index": i, "label": labels.get((e, i))}
                for e, i in conditions.iter_rows()
            ],
            "variant": values("variant"),
            "strategy": values("strategy"),
            "model": [{"key": k, "label": v} for k, v in self.names.items()],
            "status": values("status"),
        }

    # --- one record ----------------------------------------------------------------------

    def record(self, task_id: str, part: str = "1") -> dict[str, Any]:
        number = _int(part or "1", "part", low=1, high=1 << 20)
        loaded = self.loaded()
        hit = loaded.frame.filter(pl.col("taskId") == task_id)["offset"]
        if not hit.len():
            raise NotFound(
                f"no result with task id {task_id!r} in this run",
                fix="pick a result from the answers list",
            )
        with open(self.results, "rb") as f:
            f.seek(int(hit[0]))
            record = orjson.loads(f.readline())
        cell = self.cells.of(record)
        response = record.get("response") or {}
        parsed = {k: v for k, v in response.items() if k not in ("raw", "reasoning")} or None
        parts = {}
        for name in ("raw", "reasoning"):  # a long text is sent a part at a time
            text = response.get(name)
            if isinstance(text, str) and len(text) > DETAIL_CHARS:
                parts[name] = {"part": number, "parts": -(-len(text) // DETAIL_CHARS)}
                response[name] = text[(number - 1) * DETAIL_CHARS : number * DETAIL_CHARS]
        last = max((p["parts"] for p in parts.values()), default=1)
        if number > last:
            raise UserError(
                f"part {number} is past the last, {last}",
                field="part",
                fix=f"give part between 1 and {last}",
            )
        return {
            "record": record,
            "parts": parts,
            "messages": list(cell.messages) if cell is not None else [],
            "parsed": parsed,
            "study": self.study_of.get(record.get("job")),
            "conditionLabel": self.labels.get(
                (record.get("experimentSlug"), record.get("conditionIndex"))
            ),
        }


def _int(text: str, name: str, low: int | None = None, high: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UserError(
            f"{name} must be a whole number, not {text!r}",
            field=name,
            fix=f"give {name}=1 for example",
        ) from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise UserError(
            f"{name} must be {bounds}, not {value}", field=name, fix=f"give {name} {bounds}"
        )
    return value


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def model_settings(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(key, settings) per model of the plan, the identity plus the config's batch flag."""
    configs = manifest.get("config", {}).get("models", [])
    out = []
    for i, identity in enumerate(manifest["plan"]["models"]):
        batch = configs[i].get("batch") if i < len(configs) else None
        out.append((identity_key(identity), {**identity, "batch": batch}))
    return out

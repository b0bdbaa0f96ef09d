"""The cache file: one SQLite table of paid responses, keyed by the call's digest (keys.py).

Several processes may use one file at once: WAL mode lets readers go on while one writes, and a
busy timeout makes a writer wait its turn instead of failing. Writes are batched (every
FLUSH_EVERY answers, or FLUSH_S after the last commit, and at close), so a run pays one
transaction per batch, not per call; a crash loses at most the last batch, whose tasks are in
the run's results anyway. Lookups are primary-key gets.

A cache never fails a run: the first SQLite error (a file that is not a database, a lock held
past the timeout, a full disk) is reported once through `warn` and the cache turns itself off
for the rest of the run.

A cache file may be shared, so its rows are untrusted: each field read is checked for the type
and size an answer from the wire has (cache/rows.py). A row that fails is a miss: the call is made
and paid again, its answer kept in the row's place, and the first such row of a run is reported
through `warn`, naming the field, never its value.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from orchestrator.cache.rows import Refused, answer_of, text_of
from orchestrator.providers.base import Completion

BUSY_TIMEOUT_S = 5.0  # how long a write waits for another process's transaction
FLUSH_EVERY = 512  # answers per write transaction
FLUSH_S = 1.0  # or this long after the last commit, whichever comes first

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key BLOB PRIMARY KEY,
    text TEXT NOT NULL,
    usage TEXT,
    served_model TEXT,
    system_fingerprint TEXT,
    finish_reason TEXT,
    logprob REAL,
    run_id TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS responses_created ON responses (created);
CREATE TABLE IF NOT EXISTS reasoning (
    key BLOB PRIMARY KEY,
    text TEXT NOT NULL
) WITHOUT ROWID;
"""
# A reasoning model's trace lives in a table of its own, so that a cache file stays readable
# and writable by releases from before traces were kept (they neither read nor fill it).
_GET_REASONING = "SELECT text FROM reasoning WHERE key = ?"
_PUT_REASONING = "INSERT OR IGNORE INTO reasoning VALUES (?, ?)"
_GET = (
    "SELECT text, usage, served_model, system_fingerprint, finish_reason, logprob, run_id "
    "FROM responses WHERE key = ?"
)
_PUT = "INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# In place of a row that was refused (cache/rows.py): the answer paid for it again.
_REPLACE = "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_DROP_REASONING = "DELETE FROM reasoning WHERE key = ?"

Row = tuple  # (key, text, usage, served, fingerprint, finish, logprob, run_id, model, created)


def default_path() -> Path:
    """The user's cache folder: $XDG_CACHE_HOME, else ~/.cache."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bias-orchestrator" / "responses.sqlite"


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (batches open their own transaction), WAL, waiting for
    other writers rather than failing at once."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "PRAGMA synchronous = NORMAL"
        )  # WAL keeps the file sound; a power cut may lose the last batch
        conn.executescript(SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


def _fix(exc: Exception, path: Path) -> str:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return (
            "another process holds the cache locked; the next run uses it again (or set "
            "`cache` to another path)"
        )
    return (
        f"delete {path} to start an empty cache, or set `cache` to another path "
        "(run --no-cache skips it)"
    )


class ResponseCache:
    """One run's use of the cache file: lookups (unless `read` is off), batched puts, counts."""

    def __init__(self, path: Path, run_id: str, read: bool, warn: Callable[[str], None]) -> None:
        self.path, self.run_id, self.read, self._warn = path, run_id, read, warn
        self.hits = self.lookups = self.stored = 0
        self.refused = 0  # rows read that were not answers this tool writes (cache/rows.py)
        self.failed = False  # turned off by an error (said once)
        self._refused_keys: set[bytes] = set()  # their answers, once paid, replace them
        self._pending: dict[bytes, Row] = {}
        self._pending_reasoning: dict[bytes, str] = {}
        self._last_commit = time.monotonic()
        self._conn: sqlite3.Connection | None = None
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Made 0600 before SQLite opens it: every paid answer, with its prompt, is the
            # user's alone, and SQLite gives its -wal and -shm files the database's mode.
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            self._conn = connect(path)
            self._conn.text_factory = text_of
        except (sqlite3.Error, OSError) as exc:
            self._fail(exc, "open")

    @property
    def usable(self) -> bool:
        return self._conn is not None

    def _fail(self, exc: Exception, doing: str) -> None:
        """Off for the rest of the run, said once."""
        self.failed = True
        self._warn(
            f"the response cache {self.path} could not be {doing} "
            f"({type(exc).__name__}: {exc}); this run goes on without it\n"
            f"  fix: {_fix(exc, self.path)}"
        )
        self._pending.clear()
        self._pending_reasoning.clear()
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None

    def _refuse(self, key: bytes, field: str) -> None:
        """A row that is no answer this tool writes: a miss, said once a run."""
        self.refused += 1
        self._refused_keys.add(key)
        if self.refused == 1:
            self._warn(
                f"the response cache {self.path} holds an answer this tool would not have "
                f"written: its `{field}` is not what an answer from the wire may be. It was not "
                "used: the call was made (and paid) again, as is any other such answer in this "
                "run, and the new answer replaces it\n"
                "  fix: if others can write to this cache file, give `cache` a path only you "
                "write"
            )

    def get(self, key: bytes) -> Completion | None:
        if not self.read or self._conn is None:
            return None
        self.lookups += 1
        row = self._pending.get(key)
        if row is not None:  # paid in this run, by this process: not read from the file
            text, usage, served, fingerprint, finish, logprob, run_id = row[1:8]
            self.hits += 1
            return Completion(
                text,
                usage=orjson.loads(usage) if usage is not None else None,
                served_model=served,
                system_fingerprint=fingerprint,
                finish_reason=finish,
                logprob=logprob,
                cached_from=run_id,
                reasoning=self._pending_reasoning.get(key),
            )
        try:
            found = self._conn.execute(_GET, (key,)).fetchone()
            trace = self._conn.execute(_GET_REASONING, (key,)).fetchone() if found else None
        except sqlite3.Error as exc:
            self._fail(exc, "read")
            return None
        if found is None:
            return None
        try:
            completion = answer_of(found, trace[0] if trace else None)
        except Refused as refused:  # someone else's row, or a garbled one: paid again
            self._refuse(key, refused.field)
            return None
        self.hits += 1
        return completion

    def put(self, key: bytes, completion: Completion, model: str) -> None:
        if self._conn is None:
            return
        usage = orjson.dumps(completion.usage).decode() if completion.usage is not None else None
        now = time.time()
        self._pending[key] = (
            key,
            completion.text,
            usage,
            completion.served_model,
            completion.system_fingerprint,
            completion.finish_reason,
            completion.logprob,
            self.run_id,
            model,
            now,
        )
        if completion.reasoning is not None:
            self._pending_reasoning[key] = completion.reasoning
        if len(self._pending) >= FLUSH_EVERY or time.monotonic() - self._last_commit >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        self._last_commit = time.monotonic()
        if self._conn is None or not self._pending:
            return
        rows = [r for k, r in self._pending.items() if k not in self._refused_keys]
        again = [r for k, r in self._pending.items() if k in self._refused_keys]
        try:
            self._conn.execute("BEGIN IMMEDIATE")  # takes the write lock now, waiting its turn
            try:
                # a refused row's trace goes with it, whether or not the new answer has one
                self._conn.executemany(_DROP_REASONING, ((r[0],) for r in again))
                before = self._conn.total_changes
                self._conn.executemany(_PUT, rows)
                self._conn.executemany(_REPLACE, again)
                self._conn.executemany(_PUT_REASONING, self._pending_reasoning.items())
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self._fail(exc, "written")
            return
        self._refused_keys.difference_update(r[0] for r in again)
        self._pending.clear()
        self._pending_reasoning.clear()
        self.stored += (
            self._conn.total_changes - before
        )  # an answer another run kept first is not counted

    def close(self) -> None:
        self.flush()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

"""The response cache's upkeep (`orchestrator cache stats | prune`, cli/cache.py): what it
holds, and dropping old answers.

Both find the file as a run would (--cache PATH, else the campaign's `cache` setting with
--config, else the user's cache folder). stats only reads; prune deletes, then compacts the file.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from orchestrator.spec.campaign import Campaign

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """Seconds in "30d", "12h", "2w", "90m", "45s"."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise UserError(
            f"'{text}' is not a duration",
            field="--older-than",
            fix="a number and a unit: 30d, 12h, 2w (units s, m, h, d, w)",
        )
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def resolve(cache: Path | None, config: Path | None, load: Callable[[Path], Campaign]) -> Path:
    """The cache file the options name; refused if it is a folder. `load` reads a campaign
    config (orchestrator.session.load_campaign)."""
    from orchestrator.cache.session import cache_path
    from orchestrator.cache.store import default_path

    if cache is not None and config is not None:
        raise UserError(
            "--cache and --config both name a cache", field="--cache", fix="give one of them"
        )
    if cache is not None:
        path, field = cache, "--cache"
    elif config is not None:
        campaign = load(config)
        found = cache_path(campaign)
        if found is None:
            raise UserError(
                f"campaign '{campaign.config.name}' uses no response cache",
                file=str(config),
                field="cache",
                fix="set cache = true (or a path) in the config, or give --cache PATH",
            )
        path, field = found, "cache"
    else:
        path, field = default_path(), None
    if path.is_dir():
        raise UserError(
            f"{path} is a folder, not a cache file",
            field=field or "--cache",
            fix=f"give the cache file itself, e.g. --cache {path / 'responses.sqlite'}",
        )
    return path


def _open(path: Path, *, write: bool):
    """A connection to an existing cache file, or a UserError saying why it cannot be one."""
    import sqlite3

    from orchestrator.cache.store import BUSY_TIMEOUT_S

    try:
        uri = path.resolve().as_uri() + ("" if write else "?mode=ro")
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    except sqlite3.Error as exc:
        raise UserError(
            f"{path} is not a usable response cache ({exc})",
            field="--cache",
            fix=f"delete {path}; the next run with cache on starts a new one",
        ) from None
    if "responses" not in tables:
        conn.close()
        raise UserError(
            f"{path} is an SQLite file but not a response cache",
            field="--cache",
            fix="give the cache file a run wrote (responses.sqlite)",
        )
    return conn


def disk_size(path: Path) -> int:
    """The file with its write-ahead log and shared-memory index."""
    return sum(
        p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
    )


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return ""


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def show_stats(path: Path, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Column, Table

    conn = _open(path, write=False)
    try:
        count, oldest, newest = conn.execute(
            "SELECT COUNT(*), MIN(created), MAX(created) FROM responses"
        ).fetchone()
        models = conn.execute(
            "SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY 2 DESC, 1"
        ).fetchall()
        runs = conn.execute(
            "SELECT run_id, COUNT(*), MIN(created), MAX(created) FROM responses "
            "GROUP BY run_id ORDER BY 3"
        ).fetchall()
    finally:
        conn.close()
    console.print(
        f"response cache {escape(str(path))}: {count:,} entries, {human_size(disk_size(path))} "
        f"on disk; oldest {_when(oldest)}, newest {_when(newest)}",
        highlight=False,
    )
    if not count:
        return
    table = Table(
        "model", Column("entries", justify="right"), title="per model", title_justify="left"
    )
    for label, n in models:
        table.add_row(escape(label), f"{n:,}")
    console.print(table)
    table = Table(
        "run",
        Column("entries", justify="right"),
        "first kept",
        "last kept",
        title="the runs that paid for them",
        title_justify="left",
    )
    for run_id, n, first, last in runs:
        table.add_row(escape(run_id), f"{n:,}", _when(first), _when(last))
    console.print(table)


def prune_older(path: Path, seconds: float) -> tuple[int, int, str | None]:
    """(entries deleted, entries left, why the file could not be compacted or None)."""
    import sqlite3

    conn = _open(path, write=True)
    try:
        try:
            deleted = conn.execute(
                "DELETE FROM responses WHERE created < ?", (time.time() - seconds,)
            ).rowcount
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if "reasoning" in tables:  # the traces of the answers gone with them
                conn.execute("DELETE FROM reasoning WHERE key NOT IN (SELECT key FROM responses)")
        except sqlite3.Error as exc:
            raise UserError(
                f"cannot prune {path} now ({exc})",
                field="--cache",
                fix="run it again when the runs using the cache have finished",
            ) from None
        left = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        try:
            conn.execute("VACUUM")  # give the deleted pages back to the disk
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            return deleted, left, str(exc)
        return deleted, left, None
    finally:
        conn.close()

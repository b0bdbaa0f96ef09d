"""`orchestrator cache stats | prune`: what the response cache holds, and dropping old answers.

Both find the file as a run would (--cache PATH, else the campaign's `cache` setting with
--config, else the user's cache folder). stats only reads; prune deletes, then compacts the file.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.errors import UserError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

CacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache",
        help="The cache file (default: the campaign's with --config, else the user's cache folder: $XDG_CACHE_HOME or ~/.cache, bias-orchestrator/responses.sqlite).",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="A campaign config: the cache its `cache` setting names."),
]


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


def resolve(cache: Path | None, config: Path | None) -> Path:
    """The cache file the options name; refused if it is a folder."""
    from orchestrator.cache.session import cache_path
    from orchestrator.cache.store import default_path

    if cache is not None and config is not None:
        raise UserError(
            "--cache and --config both name a cache", field="--cache", fix="give one of them"
        )
    if cache is not None:
        path, field = cache, "--cache"
    elif config is not None:
        from orchestrator.spec.build import load_campaign

        campaign = load_campaign(config)
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


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return ""


def _when(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def show_stats(path: Path) -> None:
    from rich.markup import escape
    from rich.table import Column, Table

    from orchestrator.cli import console

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
        f"response cache {escape(str(path))}: {count:,} entries, {_size(disk_size(path))} "
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


def add(app: typer.Typer) -> None:
    cache_app = typer.Typer(
        help="The response cache: answers paid for in earlier runs, reused "
        "by runs of campaigns with cache = true.",
        no_args_is_help=True,
    )
    app.add_typer(cache_app, name="cache")

    @cache_app.command()
    def stats(cache: CacheOpt = None, config: ConfigOpt = None) -> None:
        """Entries, size on disk, entries per model, oldest and newest, and the runs that paid
        for them. Only reads."""
        from orchestrator.cli import console, fail

        try:
            path = resolve(cache, config)
            if not path.exists():
                console.print(f"no response cache at {path} yet (nothing cached)", highlight=False)
                return
            show_stats(path)
        except UserError as exc:
            fail(exc)

    @cache_app.command()
    def prune(
        older_than: Annotated[
            str,
            typer.Option(
                "--older-than",
                help="Delete the answers kept longer ago than this: 30d, 12h, 2w (units s, m, h, d, w).",
            ),
        ],
        cache: CacheOpt = None,
        config: ConfigOpt = None,
    ) -> None:
        """Delete the answers kept longer ago than --older-than, then compact the file."""
        from orchestrator.cli import console, err_console, fail

        try:
            seconds = parse_age(older_than)
            path = resolve(cache, config)
            if not path.exists():
                console.print(f"no response cache at {path}; nothing to prune", highlight=False)
                return
            deleted, left, problem = prune_older(path, seconds)
        except UserError as exc:
            fail(exc)
        console.print(
            f"deleted {deleted:,} entries older than {older_than} from {path}; "
            f"{left:,} left, {_size(disk_size(path))} on disk",
            highlight=False,
        )
        if problem:
            err_console.print(
                f"[yellow]note:[/] the file could not be compacted now ({problem}); "
                "new answers reuse the freed space",
                highlight=False,
            )

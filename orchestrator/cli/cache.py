"""`orchestrator cache stats | prune`: what the response cache holds, and dropping old answers.

Both find the file as a run would (--cache PATH, else the campaign's `cache` setting with
--config, else the user's cache folder). stats only reads; prune deletes, then compacts the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import orchestrator.cli.ui as ui
from orchestrator.errors import UserError

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
        from orchestrator.cache.admin import resolve, show_stats
        from orchestrator.session import load_campaign

        try:
            path = resolve(cache, config, load_campaign)
            if not path.exists():
                ui.console.print(
                    f"no response cache at {path} yet (nothing cached)", highlight=False
                )
                return
            show_stats(path, ui.console)
        except UserError as exc:
            ui.fail(exc)

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
        from orchestrator.cache.admin import disk_size, human_size, parse_age, prune_older, resolve
        from orchestrator.session import load_campaign

        try:
            seconds = parse_age(older_than)
            path = resolve(cache, config, load_campaign)
            if not path.exists():
                ui.console.print(f"no response cache at {path}; nothing to prune", highlight=False)
                return
            deleted, left, problem = prune_older(path, seconds)
        except UserError as exc:
            ui.fail(exc)
        ui.console.print(
            f"deleted {deleted:,} entries older than {older_than} from {path}; "
            f"{left:,} left, {human_size(disk_size(path))} on disk",
            highlight=False,
        )
        if problem:
            ui.err_console.print(
                f"[yellow]note:[/] the file could not be compacted now ({problem}); "
                "new answers reuse the freed space",
                highlight=False,
            )

"""`orchestrator view`: a run's results on a local page (127.0.0.1), served until Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import orchestrator.cli.ui as ui
from orchestrator.errors import UserError


def view(
    folder: Annotated[
        Path,
        typer.Argument(
            help="A run folder (runs/<campaign>/<run id>/), or a campaign folder: its latest run and the history of its runs."
        ),
    ],
    port: Annotated[
        int,
        typer.Option(
            callback=ui.number(0, 65535, example="0"),
            help="Port on 127.0.0.1 (0 picks a free one).",
        ),
    ] = 8766,
) -> None:
    """Browse a run in the browser: its progress, spend and effects, and every answer behind
    them (filtered by study, experiment, condition, model, status or free text). Calls no
    model and writes nothing but the results' columnar snapshot (results.snapshot/, a cache
    that makes the next opening fast)."""
    import asyncio

    from orchestrator.viewer.server import open_target, serve

    def ready(url: str) -> None:
        ui.console.print(f"viewer: {url}\n(Ctrl-C stops it)", highlight=False)
        if data.loaded().note:
            ui.note(data.loaded().note)

    results = folder / "results.ndjson"
    if results.is_file() and results.stat().st_size > 50e6:  # a large run takes a while to read
        ui.console.print(
            f"reading {results} ({results.stat().st_size / 1e6:,.0f} MB)...", highlight=False
        )
    try:
        data, campaign_dir = open_target(folder)
        asyncio.run(serve(data, port, campaign_dir, ready))
    except UserError as exc:
        ui.fail(exc)
    except KeyboardInterrupt:
        pass


def add(app: typer.Typer) -> None:
    app.command()(view)

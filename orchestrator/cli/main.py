"""The `orchestrator` command: the Typer app and its command groups, one module each. Every
module here is a thin definition over a library function; the work is imported when a command
runs, so `orchestrator --help` loads no polars."""

from __future__ import annotations

from typing import Annotated, Any

import typer

import orchestrator.cli.cache as cache
import orchestrator.cli.emulator as emulator
import orchestrator.cli.nightly as nightly
import orchestrator.cli.plan as plan
import orchestrator.cli.power as power
import orchestrator.cli.results as results
import orchestrator.cli.run as run
import orchestrator.cli.ui as ui
import orchestrator.cli.viewer as viewer
from orchestrator.studies import registered

app = typer.Typer(
    help="Run cognitive-bias benchmark campaigns against language models: "
    "plan the task matrix, run it under rate limits with resume, export results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from orchestrator import __version__

        ui.console.print(f"bias-orchestrator {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version (written in every run's manifest as 'software') and exit.",
        ),
    ] = False,
) -> None:
    """Options before any command (the app's help says what the tool does)."""


class _Lent:
    """What a study's own commands use of the command line (studies/base.py CommandLine), read
    at call time, so `run --log` reaches them too."""

    @property
    def console(self):
        return ui.console

    def fail(self, exc: Any):
        ui.fail(exc)

    def run_and_report(self, campaign: Any, **options: Any) -> None:
        run.run_and_report(campaign, **options)


for command in (run.init, plan.plan, power.power, run.run):
    app.command()(command)
results.add(app)
for study in registered():  # commands of a study's own (the trace audit's review, calibrate...)
    study.add_commands(app, _Lent())
for group in (nightly, cache, emulator, viewer):
    group.add(app)

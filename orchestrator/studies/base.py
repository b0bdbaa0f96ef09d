"""What a study is to the generic pipeline.

A study family (a benchmark's job format, its analysis, report section, exports and terminal
table) lives in one folder under `studies/` and is listed once in `studies/__init__.py`. The
planner, the engine, the CLI and the report shell only ever loop over the registered studies.

A study's reader is imported with it (`plan` and `run` need it); its analysis, report and
exports import polars, scipy and matplotlib, so they are imported when first used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn, Protocol

if TYPE_CHECKING:
    import polars as pl
    import typer
    from rich.console import Console

    from orchestrator.analysis.load import Run
    from orchestrator.analysis.power import Planned
    from orchestrator.engine.caller import Routine
    from orchestrator.errors import UserError
    from orchestrator.plan import Plan
    from orchestrator.spec.campaign import Campaign
    from orchestrator.spec.models import Job


class CommandLine(Protocol):
    """What the command line lends a study's own commands: studies sit below it (the layers in
    docs/architecture.md), so they take these as arguments instead of importing the CLI."""

    @property
    def console(self) -> Console: ...

    def fail(self, exc: UserError) -> NoReturn: ...

    def run_and_report(self, campaign: Campaign, **options: Any) -> None: ...


class Output(NamedTuple):
    """One analysis output: written as <stem>.parquet/.csv/.json, its rows under `key` in json."""

    stem: str
    key: str
    frame: pl.DataFrame


class Section(NamedTuple):
    """A report section: a heading, a note on method, a table, and figures shown inline."""

    heading: str
    note: str
    rows: list[dict[str, str]]
    inline: tuple[
        tuple[str, str], ...
    ] = ()  # (name, svg); the PNG is beside the report as name.png


class Figure(NamedTuple):
    """A figure in the report's Figures part."""

    title: str
    name: str
    svg: str


class Deviation(NamedTuple):
    """Where a study's method departs from its seed document, and why: shown in the report."""

    what: str
    why: str


@dataclass
class ReportPart:
    sections: list[Section] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


class Study:
    """The interface; each study subclasses it and overrides what it has."""

    kind: str  # the Job.kind its reader produces; analysis picks the run's jobs by it
    format_hint: str  # how its job files are recognised, for an "unrecognised format" message
    exports: tuple[str, ...] = ()  # `export --format` names it writes
    seed: str = ""  # the seed document its method comes from, as the report names it
    deviations: tuple[Deviation, ...] = ()  # from that method, each with its reason
    # Contract kinds whose tasks the study calls itself (engine/caller.py), not as one call
    routine_kinds: tuple[str, ...] = ()

    def recognises(self, data: Any) -> bool:
        """Whether a parsed job file is in this study's format."""
        raise NotImplementedError

    def read(self, data: Any, path: Path, job_id: str) -> Job:
        raise NotImplementedError

    def reads(self, path: Path) -> bool:
        """Whether this study reads a job source that is not a JSON job file (a folder, JSONL)."""
        return False

    def read_path(self, path: Path, job_id: str) -> Job:
        raise NotImplementedError

    def routine(self, kind: str) -> Routine:
        """The call routine for tasks of one of its `routine_kinds`."""
        raise NotImplementedError

    def add_commands(self, app: typer.Typer, cli: CommandLine) -> None:
        """Commands of its own on the `orchestrator` command line (their work imported when
        run), using what `cli` lends."""

    def analyze(self, run: Run) -> list[Output]:
        """Its tables for the run (none when the run holds no job of its kind)."""
        return []

    def print_tables(self, tables: dict[str, pl.DataFrame], console: Console) -> None:
        """Its effects in the terminal, after `analyze`."""

    def report(self, tables: dict[str, pl.DataFrame], run: Run, out_dir: Path) -> ReportPart:
        return ReportPart()

    def effects(self, tables: dict[str, pl.DataFrame]) -> pl.DataFrame | None:
        """Its headline effects from its tables, in analysis/effects.EFFECT_SCHEMA (made with
        effect_rows): what `compare` and `trend` follow from one run to the next."""
        return None

    def export(self, name: str, run_dir: Path, out_dir: Path) -> dict[Path, int]:
        """Write export format `name` (one of `exports`); returns records written per file."""
        raise NotImplementedError

    def power(self, plan: Plan, pilot: Run | None, alpha: float) -> list[Planned]:
        """Its tests as `plan` gives them (analysis/power.py), one per experiment (or score) and
        model, each with the design its minimum detectable effect follows from: the variances
        measured in `pilot` where it holds the experiment, stated defaults where not."""
        return []

    def has_jobs(self, run: Run) -> bool:
        return any(job.kind == self.kind for job in run.jobs.values())

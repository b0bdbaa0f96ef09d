"""A run folder from Python: `orchestrator.load(run_dir)` and the `Run` that `orchestrator.run`
returns. Reading calls no model and writes nothing but the results' columnar snapshot (a cache
beside the log); `report()` and `export()` write their files, as the commands do."""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

if TYPE_CHECKING:
    import polars as pl

T = TypeVar("T")


class Run:
    """A run folder (`runs/<campaign>/<run-id>/`): its status, its results as a polars
    DataFrame, the analysis's effects, its report and exports.

    Made by `orchestrator.load(run_dir)` or returned by `orchestrator.run(...)`. Each method
    reads the folder afresh, so a `Run` of a run still going on shows it as it is now.
    Every method raises `orchestrator.UserError` for a folder it cannot read.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @property
    def manifest(self) -> dict[str, Any]:
        """The run's manifest.json: its config, plan, software and start time."""
        from orchestrator.engine.store import RunStore

        return RunStore(self.path).read_manifest()

    def status(self) -> dict[str, Any]:
        """Per model: planned tasks, tasks by final status, pending tasks, retries and spend;
        and the run's `complete`, `pending` and `spendUsd`. The same as `orchestrator status
        --json` (docs/schemas/status.schema.json)."""
        from orchestrator.engine.status import status_report

        return status_report(self.path)

    @overload
    def results(self, lazy: Literal[False] = False) -> pl.DataFrame: ...

    @overload
    def results(self, lazy: Literal[True]) -> pl.LazyFrame: ...

    def results(self, lazy: bool = False) -> pl.DataFrame | pl.LazyFrame:
        """One row per task's final record, in the order they were written: study, job,
        experimentSlug, biasSlug, conditionIndex, conditionLabel, strategy, variant, sample,
        modelKey, modelLabel, the rendered prompt, the answer (`answer`, the whole text) and
        what was parsed of it (`choice` or `value`), status, token counts, cost and timings. The
        same rows and columns as `export(format="parquet")` writes (docs/interop.md).

        `lazy=True`: a polars LazyFrame read from the results' columnar snapshot, for runs of a
        million records: the same rows and labels without `messages`, `prompt`, `reason`,
        `reasoning`, `error` and `startedAt`, and `answer` cut to its first 4,096 characters.
        Select and filter before `.collect()`."""
        if lazy:
            from orchestrator.interop.records import final_lazy

            return reading_results(self.path, lambda: final_lazy(self.path))
        from orchestrator.interop.records import final_table

        return reading_results(self.path, lambda: final_table(self.path))

    def effects(self) -> pl.DataFrame:
        """Every study's headline effects, one row per study x measure x experiment x strategy
        x model: the effect with its standard error, 95% CI and p-value, n and degrees of
        freedom, a robust estimate where the study has one, and whether the model is
        deterministic (one draw at temperature 0: no spread to test). What `compare` and
        `trend` follow from night to night; `tables()` has each study's full tables. Nothing is
        written."""
        from orchestrator.analysis.load import open_run
        from orchestrator.nightly.effects import study_effects

        return reading_results(self.path, lambda: study_effects(open_run(self.path)))

    def tables(self) -> dict[str, pl.DataFrame]:
        """Every study's analysis tables, by the file name `orchestrator analyze` gives them
        (`summary`, `bsi_summary`, `judge_summary`, ...). Nothing is written."""
        from orchestrator.analysis.load import open_run
        from orchestrator.analysis.summary import study_outputs

        def read() -> dict[str, pl.DataFrame]:
            outputs = study_outputs(open_run(self.path))
            return {table.stem: table.frame for _, found in outputs for table in found}

        return reading_results(self.path, read)

    def report(self) -> dict[str, Path]:
        """Analyse the run and write report/report.md and a self-contained report/report.html
        in its folder; returns their paths by "markdown" and "html"."""
        from orchestrator.report.render import write_report

        return reading_results(self.path, lambda: write_report(self.path))

    def export(
        self, format: str = "parquet", out: str | PathLike[str] | None = None
    ) -> dict[Path, int]:
        """Write the results in `format`: a study's published format (ai-benchmark,
        judge-history, instructed-csv, ...), or every study's records as parquet, csv or
        inspect (Inspect eval logs; the [inspect] extra). Into `out`, by default
        RUN_DIR/export/FORMAT; returns the records written per file ({} when the run holds
        none of that format)."""
        from orchestrator.api.exports import export_run

        target = Path(out) if out is not None else None
        return reading_results(self.path, lambda: export_run(self.path, format, target))


def load(run_dir: str | PathLike[str]) -> Run:
    """A run folder to read (`runs/<campaign>/<run-id>/`, as `orchestrator.run` and the
    command line print it). Raises `UserError` when it is not one."""
    from orchestrator.engine.store import RunStore

    path = Path(run_dir)
    RunStore(path).read_manifest()  # not a run folder: said now, not at the first read
    return Run(path)


def reading_results(run_dir: Path, work: Callable[[], T]) -> T:
    """work(), with a results line that polars cannot parse named as a UserError (the cheap
    check passes a record glued to a torn line; engine/results.py)."""
    import polars as pl

    from orchestrator.engine.results import RESULTS
    from orchestrator.engine.snapshot import parse_failure

    try:
        return work()
    except pl.exceptions.ComputeError:
        problem = parse_failure(run_dir / RESULTS)
        if problem is None:
            raise
        raise problem from None

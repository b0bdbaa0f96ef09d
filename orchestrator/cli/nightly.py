"""The nightly commands: schedule, history, compare, trend. Their work is in orchestrator/nightly/,
imported when a command runs (so --help stays light)."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer

import orchestrator.cli.ui as ui
from orchestrator.errors import UserError
from orchestrator.nightly.comparing import EXIT_HELP
from orchestrator.nightly.flags import FLAGS


def _schedule(app: typer.Typer) -> None:
    @app.command()
    def schedule(
        config: Annotated[Path, typer.Argument(help="Campaign config (TOML) to run every night.")],
        at: Annotated[
            str, typer.Option(help="Local time of day to start, HH:MM (24-hour).")
        ] = "02:00",
        budget: Annotated[
            float | None, typer.Option(help="USD each night's run may spend (run --budget).")
        ] = None,
        install_timer: Annotated[
            bool,
            typer.Option("--install", help="Install and start the systemd user timer for you."),
        ] = False,
        force: Annotated[
            bool,
            typer.Option(
                "--force", help="With --install: replace different unit files of the same name."
            ),
        ] = False,
    ) -> None:
        """Print a crontab line and a systemd user service + timer that run CONFIG every night
        (run --run-id auto --log auto, from this folder); --install sets up the timer.
        Exit 2 on a bad config or time (nothing written); 1 if systemctl fails."""
        from rich.markup import escape

        from orchestrator.nightly.schedule import explain, install, make_schedule
        from orchestrator.session import load_campaign

        try:
            s = make_schedule(config, at, budget, load_campaign)
            folder, problem = install(s, force) if install_timer else (None, None)
        except UserError as exc:
            ui.fail(exc)
        sys.stdout.write(explain(s))  # not through rich: it would wrap the lines to paste
        if problem:
            ui.err_console.print(
                f"[red]error:[/] {escape(problem)}\nthe unit files are in {escape(str(folder))}; "
                "fix the above and run the two systemctl commands printed",
                highlight=False,
            )
            raise typer.Exit(1)
        if folder:
            ui.console.print(
                f"installed and started {s.unit}.timer (unit files in {escape(str(folder))})",
                highlight=False,
            )


def _history(app: typer.Typer) -> None:
    @app.command()
    def history(
        campaign_dir: Annotated[
            Path,
            typer.Argument(
                help="A campaign folder: runs/<campaign>/, the folder holding one folder per run."
            ),
        ],
        out: Annotated[
            Path | None,
            typer.Option(
                help="Write history.csv and history.parquet in this folder instead of CAMPAIGN_DIR."
            ),
        ] = None,
        as_json: ui.JsonOpt = False,
    ) -> None:
        """One row per run of a campaign folder, oldest first: a table here (or --json), and
        the same rows in history.csv and history.parquet (in CAMPAIGN_DIR, or --out).
        Reads only: takes no lock, calls no model, writes nothing into a run folder but the
        columnar snapshot of its results (results.snapshot/, a cache).

        Columns (times in UTC; lists joined with "; " in the csv):
        run: the run's folder; started: when it started (manifest createdAt);
        last result: its latest result's finishedAt (dated if not the start's day);
        status: complete | N tasks pending (failed or not run: orchestrator run RUN
          resumes it) | no results | running (pid, host): the process holding its
          lock lives | interrupted: that process died holding it (kill -9, a crash,
          a reboot) | locked (pid, host): held from another host, not checked;
        tasks: planned; done: with a final record; failed: final status failed;
        parse errors, refused: tasks with those final statuses;
        spend $: every attempt paid for (0 where unpriced);
        served model (fingerprint): per model, the model strings the provider
          answered as and its system_fingerprint (files: served_models, fingerprints);
        version: the software that started the run; plan: the plan hash (short);
        log: CAMPAIGN_DIR/logs/RUN.log exists (run --log auto; files: its path).
        In the files: run, started, last_result, status, tasks, done, failed,
        parse_errors, refusals, spend_usd, served_models, fingerprints, software,
        plan, log.
        """
        from orchestrator.nightly.history import campaign_history, history_table, write_history
        from orchestrator.nightly.runs import output_folder

        try:
            if out is not None:
                output_folder(out, "history.csv and history.parquet")
            frame = campaign_history(campaign_dir)
            written = write_history(frame, out if out is not None else campaign_dir)
        except UserError as exc:
            ui.fail(exc)
        if as_json:  # docs/schemas/history.schema.json
            from orchestrator import __version__

            ui.print_json(
                {
                    "software": __version__,
                    "campaign": str(campaign_dir),
                    "written": [str(p) for p in written],
                    "runs": frame.to_dicts(),
                }
            )
            return
        ui.console.print(history_table(frame, campaign_dir))
        ui.console.print(f"wrote {written[0]} and {written[1]}", highlight=False)


def _compare(app: typer.Typer) -> None:
    @app.command(
        epilog=EXIT_HELP,
        help=(
            "What changed between two runs of a campaign, for every study: per experiment x model the "
            "change in effect with a 95% CI and p (Benjamini-Hochberg across the comparison); parse "
            "errors, refusals, latency p50/p95 and cost per call; served model and system fingerprint.\n\n"
            "Flags: " + "; ".join(f"{k}: {v}" for k, v in FLAGS.items()) + ".\n\n"
            "Writes <A>__<B>.json and .csv (the effects) to the compare folder. Calls no model."
        ),
    )
    def compare(
        run_a: Annotated[
            Path | None,
            typer.Argument(
                help="The earlier run folder (or, with --previous, a campaign or run folder).",
                show_default=False,
            ),
        ] = None,
        run_b: Annotated[
            Path | None, typer.Argument(help="The later run folder.", show_default=False)
        ] = None,
        previous: Annotated[
            bool,
            typer.Option(
                "--previous",
                help="Compare the given run (or the campaign folder's latest) with the run started before it.",
            ),
        ] = False,
        fail_on: Annotated[
            str,
            typer.Option(
                help="Flags that make the exit code 1: 'all' or a comma-separated list of "
                + ", ".join(FLAGS)
                + "."
            ),
        ] = "all",
        on_change: Annotated[
            str | None,
            typer.Option(
                help="When a --fail-on flag is raised, run this shell command with the comparison's JSON path as its last argument (also in $ORCHESTRATOR_COMPARE_JSON): a notification. It inherits no API key: only PATH, HOME, the locale and the variables --on-change-env names."
            ),
        ] = None,
        on_change_env: Annotated[
            list[str] | None,
            typer.Option(
                help="An environment variable the --on-change command may read (a webhook's "
                "URL, say); repeatable."
            ),
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option(
                help="Folder for the comparison files (default: <campaign folder>/compare)."
            ),
        ] = None,
        show_all: Annotated[
            bool, typer.Option("--all", help="List every effect, not only the flagged ones.")
        ] = False,
        as_json: ui.JsonOpt = False,
    ) -> None:
        from orchestrator.engine.files import folder_within
        from orchestrator.nightly.compare_view import print_comparison, write_comparison
        from orchestrator.nightly.comparing import (
            fail_on_set,
            load_and_compare,
            pick_runs,
            run_hook,
        )
        from orchestrator.nightly.runs import output_folder

        try:
            wanted = fail_on_set(fail_on)
            older, newer = pick_runs(run_a, run_b, previous)
            folder = out or newer.parent / "compare"
            output_folder(folder, "comparison")  # before any read
            # a campaign folder may come from someone else: no link on the way into it
            folder_within(newer.parent if out is None else folder, folder, make=False)
            try:
                comparison = load_and_compare(older, newer)
            except UserError:
                raise
            except Exception:  # a crash must not read as "something changed" (exit 1)
                traceback.print_exc()
                raise typer.Exit(3) from None
            counted = comparison.counted(wanted)
            code = 1 if counted else 0
            path = write_comparison(comparison, folder, wanted, code)
        except UserError as exc:
            ui.fail(exc)
        if as_json:  # the comparison file's document (docs/schemas/compare.schema.json)
            from orchestrator.nightly.compare import as_json as comparison_json

            ui.print_json(comparison_json(comparison, wanted, code))
        else:
            print_comparison(comparison, ui.console, show_all, wanted)
            ui.console.print(f"written: {path} and {path.with_suffix('.csv')}")
        if counted and on_change:
            status = run_hook(on_change, path, tuple(on_change_env or ()), as_json)
            if status:
                ui.err_console.print(f"[yellow]--on-change command exited {status}[/]")
        raise typer.Exit(code)


def _trend(app: typer.Typer) -> None:
    @app.command()
    def trend(
        campaign_dir: Annotated[
            Path,
            typer.Argument(
                help="A campaign folder: runs/<campaign>/, holding one folder per night."
            ),
        ],
        out: Annotated[
            Path | None, typer.Option(help="Where to write (default CAMPAIGN_DIR/trend).")
        ] = None,
    ) -> None:
        """Each headline effect night by night, with 95% CIs, per experiment x model, and the
        nights where a model's served model string or system fingerprint changed: trend.csv,
        trend.parquet, figures and report.md / report.html in CAMPAIGN_DIR/trend/. Runs that
        cannot be read yet are skipped with a note. Calls no model; writes into no run folder."""
        from rich.markup import escape

        from orchestrator.nightly.trend import summary, write_trend

        try:
            found, paths = write_trend(campaign_dir, out)
        except UserError as exc:
            ui.fail(exc)
        for name, why in found.skipped:
            ui.err_console.print(
                f"[yellow]note:[/] skipped run {escape(name)}: {escape(why)}", highlight=False
            )
        figures = [p for p in paths.values() if p.suffix == ".png"]
        for line in [
            *summary(found),
            f"report:  {paths['html']} (open it in a browser; no network needed)",
            f"         {paths['markdown']}",
            f"table:   {paths['csv']} (and .parquet beside it)",
            f"figures: {', '.join(str(p) for p in figures)} (and .svg beside each)",
        ]:
            ui.console.print(escape(line), highlight=False)


def add(app: typer.Typer) -> None:
    for command in (_schedule, _history, _compare, _trend):
        command(app)

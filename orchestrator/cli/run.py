"""`orchestrator init` and `orchestrator run`: start a campaign, or resume a run folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

import orchestrator.cli.ui as ui
from orchestrator.cli.ui import ConfigArg
from orchestrator.errors import UserError

if TYPE_CHECKING:  # the config's models cost 0.15 s to import: status and analyze need none
    from orchestrator.spec.campaign import Campaign


def load_target(
    target: Path,
    samples: int | None = None,
    run_id: str | None = None,
    models: list[str] | None = None,
    limit: int | None = None,
    output_dir: Path | None = None,
) -> Campaign:
    """A campaign config to start (with the flags' overrides: a flag wins over the config), or
    a run folder to resume (api/starting.py)."""
    from orchestrator.api.starting import CLI_NAMES, price_notes, starting_campaign

    overrides = {
        "samples": samples,
        "run_id": run_id,
        "models": models or None,
        "items": limit,
        "output_dir": str(output_dir) if output_dir is not None else None,
    }
    campaign = starting_campaign(target, overrides, CLI_NAMES)
    for note in price_notes(campaign):
        ui.note(note)
    return campaign


def check_received(campaign: Campaign, run_dir: Path, trust: bool) -> None:
    """A resumed folder's endpoints named, and one this user did not make checked
    (api/starting.py): on a terminal the user is asked before a key goes to a host that is not
    a provider's own."""
    import sys

    from orchestrator.api.starting import check_received as check

    def ask(question: str) -> bool | None:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            return None
        ui.err_console.print(question, highlight=False, markup=False)
        return typer.confirm("send them there?", default=False, err=True)

    def say(text: str) -> None:
        ui.err_console.print(text, highlight=False, markup=False)

    check(campaign, run_dir, trust, say, ui.note, ask)


ModelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--model",
        help="Run these models instead of the config's [[models]] (repeat it for several): "
        "PRESET/NAME (a preset of configs/presets.toml and the model's name, e.g. "
        "openai/gpt-4o-mini; its key from the preset's environment variable), 'local' (the "
        "embedded SmolLM2, no key) or 'simulated'.",
        show_default=False,
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit",
        callback=ui.number(1, example="20"),
        help="At most N items (prompt variants) per experiment x condition, a seeded sample "
        "(as the config's `items`); a job with one item per condition (the benchmark format) "
        "keeps N of its experiments. plan says how it applies to each job; for fewer calls "
        "on a small job, lower --samples.",
        show_default=False,
    ),
]
OutputDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--output-dir",
        help="Where the campaign's folder of runs goes (overrides the config's output_dir).",
        show_default=False,
    ),
]


def init(
    folder: Annotated[
        Path, typer.Argument(help="Folder for campaign.toml (created if missing).")
    ] = Path("."),
    experiment: Annotated[
        str | None,
        typer.Option(
            "--experiment",
            help="Instead, start an experiment of your own: write KIND-experiment.json, a job "
            "file with two conditions whose answer is a choice, a number, a rating (1-10, "
            "declared) or free-text (read by an extractor model), and a campaign.toml that "
            "runs it on the simulated respondent when none is there. docs/your-own-experiment.md.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Write a starter campaign config, campaign.toml: the AI Bias Benchmark on the simulated
    respondent and the local model, with commented examples for hosted providers; or, with
    --experiment KIND, a job file of your own to edit. Never overwrites."""
    try:
        if experiment is None:
            from orchestrator.starter import write_starter

            ui.console.print(write_starter(folder), highlight=False)
            return
        from orchestrator.starter_experiments import write_experiment

        written, todo = write_experiment(folder, experiment)
    except UserError as exc:
        ui.fail(exc)
    ui.console.print("wrote " + ", ".join(str(p) for p in written), highlight=False)
    ui.note(todo)
    config = folder / "campaign.toml"
    ui.console.print(
        f"next: edit {written[0].name} (docs/your-own-experiment.md), then\n"
        f"  orchestrator plan {config}    # check the answer column: the scale or options\n"
        f"  orchestrator run {config}",
        highlight=False,
    )


def run(
    config: ConfigArg,
    run_id: Annotated[
        str | None,
        typer.Option(
            help="Run id under runs/<campaign>/ (default from the config, else 'default'). 'auto' names the run by the UTC date and points runs/<campaign>/latest at it: while that night is running or has tasks to do, a second auto run waits, is refused or resumes it; after it finished, the next is DATE-2."
        ),
    ] = None,
    samples: Annotated[
        int | None, typer.Option(help="Samples per condition (overrides the config).")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            callback=ui.number(0, example="5"),
            help="USD this run may spend in all: a plan estimated above it is refused, and the run stops (resumably) when its spend reaches it.",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="If another process is running this run, wait for it to finish instead of exiting with code 2.",
        ),
    ] = False,
    log: Annotated[
        str | None,
        typer.Option(
            help="Also append what the run prints to this file (in a folder that exists, outside the run folders); 'auto': runs/<campaign>/logs/<run-id>.log (scheduled runs use it)."
        ),
    ] = None,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Send the tasks of every model whose provider has a batch API (openai, anthropic, gemini) as batch jobs: about half the price, results within 24 hours (as batch = true on each model).",
        ),
    ] = False,
    no_wait: Annotated[
        bool,
        typer.Option(
            "--no-wait",
            help="Batch mode: submit the batches and exit (code 0); a later run collects what has ended and polls the rest.",
        ),
    ] = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Neither read nor write the response cache, whatever the config's `cache` says.",
        ),
    ] = False,
    model: ModelOpt = None,
    limit: LimitOpt = None,
    output_dir: OutputDirOpt = None,
    trust_endpoints: Annotated[
        bool,
        typer.Option(
            "--trust-endpoints",
            help="Resuming a run folder you did not make (a colleague's, a paper's, or one of yours from before run folders were sealed): send your keys to the URLs its manifest names even where they are not a provider's own host, and count the folder as yours from then on. Without it, such a run asks on a terminal and is refused elsewhere.",
        ),
    ] = False,
) -> None:
    """Run a campaign, or resume it: running the same command again skips finished tasks.

    CONFIG is a campaign config (TOML) or a run folder (runs/<campaign>/<run-id>/): a folder is
    resumed where it is, from any current folder, with the settings it was started with.
    Results stream to <run>/results.ndjson, one line per task. One process owns a run: a second
    `run` of the same run exits 2 naming the one holding it (or waits, with --wait).
    Exit codes: 0 all tasks done; 1 some tasks failed (run again to retry them);
    2 bad input or the run is in use (nothing started); 3 the budget was reached (run again
    with a higher --budget); 130/143 interrupted by Ctrl-C/SIGTERM (run again to resume).
    """
    try:
        campaign = load_target(config, samples, run_id, model, limit, output_dir)
        if campaign.run_dir is not None:  # a folder resumed: its manifest names the endpoints
            check_received(campaign, campaign.run_dir, trust_endpoints)
    except UserError as exc:
        ui.fail(exc)
    if no_cache:  # not part of the plan: a run may be resumed with or without it
        campaign.config = campaign.config.model_copy(update={"cache": False})
    options: dict[str, Any] = {
        "budget": budget,
        "wait": wait,
        "batch": batch,
        "wait_for_batches": not no_wait,
    }
    if log is None:
        return run_and_report(campaign, **options)
    run_logged(campaign, log, options)


def run_and_report(
    campaign: Campaign, budget: float | None = None, wait: bool = False, **batch_options: Any
) -> None:
    """Run a loaded campaign and say how it went, with `run`'s exit codes."""
    from orchestrator.session import resume_command, run_campaign

    try:
        outcome = run_campaign(campaign, ui.console, budget=budget, wait=wait, **batch_options)
    except UserError as exc:
        ui.fail(exc)
    except KeyboardInterrupt:  # before any model was called (e.g. waiting for the lock)
        ui.err_console.print(
            f"interrupted before any model was called; to start, run again:\n  {resume_command(campaign)}"
        )
        raise typer.Exit(130) from None
    results = outcome.run_dir / "results.ndjson"
    if outcome.already_complete:
        ui.console.print(f"run already complete; no model was called. results: {results}")
        return
    counts = ", ".join(f"{n:,} {s}" for s, n in sorted(outcome.by_status.items())) or "nothing new"
    ui.console.print(f"wrote {counts}\nresults: {results}")
    if outcome.unsent:
        ui.err_console.print(
            f"{outcome.unsent:,} task(s) of models in batch mode were not sent (see above)"
        )
    if outcome.in_flight:
        ui.console.print(
            f"{outcome.in_flight:,} task(s) are in batches in flight; to collect them "
            f"(and wait for the rest), run:\n  {resume_command(campaign, collect=True)}"
        )
    if outcome.by_status["too_long"]:
        ui.err_console.print(
            f"[yellow]{outcome.by_status['too_long']:,} request(s) were over the model's "
            "context length and hold no answer (status too_long; see orchestrator status)[/]"
        )
    labels = {m.key: m.label for m in campaign.config.models}
    for key, message in outcome.state.fatal.items():
        name = f"{labels[key]} [{key}]" if key in labels else key
        ui.err_console.print(
            f"[red]model {escape(name)} stopped on a fatal error:[/] {escape(message)}"
        )
    if outcome.state.budget_reached:
        ui.err_console.print(
            f"budget reached: ${outcome.state.spend:,.4f} spent of ${budget:,.4f}; finished "
            f"results are saved. resume with a higher budget:\n  {resume_command(campaign)}"
        )
    elif outcome.state.interrupted_by is not None:
        ui.err_console.print(
            f"interrupted; finished results are saved. resume with:\n  {resume_command(campaign)}"
        )
    elif outcome.exit_code:
        ui.err_console.print(
            f"some tasks failed; run the same command again to retry them:\n  {resume_command(campaign)}"
        )
    raise typer.Exit(outcome.exit_code)


def run_logged(campaign: Campaign, given: str, options: dict) -> None:
    """`run --log`: run_and_report with the consoles also writing the log (named after the run,
    so a run started with --run-id auto is named first)."""
    from orchestrator.nightly.runlog import log_path, logging_to
    from orchestrator.session import name_run, resume_command, run_dir_for

    name_run(campaign)
    where = run_dir_for(campaign)
    try:
        path = log_path(given, where.parent, where.name)
    except UserError as exc:
        ui.fail(exc)
    terminal = ui.console, ui.err_console
    try:
        with logging_to(path, resume_command()) as consoles:
            ui.console, ui.err_console = consoles
            run_and_report(campaign, **options)
    finally:
        ui.console, ui.err_console = terminal

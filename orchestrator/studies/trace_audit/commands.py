"""The audit's own commands: `audit` (plan and run one judge call per trace), `review` (people go
through escalated and flagged traces), `calibrate` (agreement with a golden set's labels) and
`audit-gate` (fail CI when a judge change misses what the baseline caught)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.errors import UserError
from orchestrator.spec.model_flag import model_from_flag

if TYPE_CHECKING:
    from orchestrator.studies.base import CommandLine

JUDGE_HELP = (
    "The judge: 'local' (SmolLM2, no key), 'simulated', or PRESET/NAME from configs/presets.toml, "
    "e.g. openai/gpt-4o-mini, anthropic/claude-3-5-sonnet-latest (its key from the preset's "
    "environment variable)."
)


def model_from_spec(spec: str, option: str, temperature: float, max_tokens: int) -> dict[str, Any]:
    settings = {"temperature": temperature, "max_tokens": max_tokens}
    if spec == "simulated":  # the simulated judge (providers/simulated_audit.py)
        return {"provider": "simulated", "name": "simulated-judge", **settings}
    return model_from_flag(spec, option, **settings)


def audit_campaign(
    source: Path,
    judge: str,
    screener: str | None,
    *,
    name: str | None,
    output_dir: Path,
    run_id: str,
    temperature: float,
    max_tokens: int,
    job_settings: dict[str, Any],
):
    from orchestrator.spec.build import apply_catalogues, build_campaign
    from orchestrator.spec.campaign import CampaignConfig
    from orchestrator.spec.checks import check_campaign
    from orchestrator.spec.loading import validate
    from orchestrator.studies.trace_audit.reader import ids_digest, is_source, read_ids, read_source

    if not is_source(source):
        raise UserError(
            f"'{source}' is neither a traces file (.jsonl) nor a run folder",
            field="SOURCE",
            fix="give a .jsonl file of traces or runs/<campaign>/<run-id>",
        )
    job = read_source(source, **job_settings)
    # a control arm or a subset is a run of its own, not a changed plan of the whole audit
    suffix = ""
    if job_settings.get("context", "own") != "own":
        suffix += f"-{job_settings['context']}"
    if job_settings.get("only") is not None:  # another list of ids is another campaign
        ids_file = Path(job_settings["only"])
        suffix += f"-{ids_file.stem}-{ids_digest(read_ids(ids_file))}"
    raw = {
        "name": name or job.id + suffix,
        "jobs": [str(source)],
        "output_dir": str(output_dir),
        "run_id": run_id,
        "models": [model_from_spec(judge, "--judge", temperature, max_tokens)],
    }
    if screener:
        raw["screener"] = model_from_spec(screener, "--screener", temperature, 16)
    config = validate(CampaignConfig, raw, Path("command line"))
    # The job as read above, with the command's settings: the source is read once.
    campaign = build_campaign(apply_catalogues(config, Path.cwd(), None), None, [job])
    check_campaign(campaign)
    return campaign


def add(app: typer.Typer, cli: CommandLine) -> None:
    @app.command()
    def audit(
        source: Annotated[
            Path,
            typer.Argument(
                help="Traces: a JSONL file of {trace_id, reasoning_trace, task_context, evidence, expected_bias_profile}, or a finished run folder: its models' own reasoning (reasoning models), else its answers under cot."
            ),
        ],
        judge: Annotated[str, typer.Option(help=JUDGE_HELP)] = "local",
        screener: Annotated[
            str | None,
            typer.Option(
                help="A cheaper model that first answers 'possible bias?'; only flagged traces get the full audit (same forms as --judge)."
            ),
        ] = None,
        temperature: Annotated[
            float,
            typer.Option(help="The judge's temperature (seed 003: 0 for reproducible audits)."),
        ] = 0.0,
        max_tokens: Annotated[int, typer.Option(help="Longest judge answer.")] = 1024,
        allow_unauditable: Annotated[
            bool,
            typer.Option(
                help="Audit traces the seed's guards refuse (under 3 steps, nothing to compare against), marked as such."
            ),
        ] = False,
        min_steps: Annotated[
            int, typer.Option(min=1, help="Fewest steps (non-empty lines) a trace needs.")
        ] = 3,
        strategy: Annotated[
            list[str] | None,
            typer.Option(
                help="From a run: the strategies whose records are audited (default: all for "
                "a model's own reasoning, cot for answers)."
            ),
        ] = None,
        traces: Annotated[
            str,
            typer.Option(
                help="From a run: reasoning (what reasoning models showed of their thinking, "
                "kept apart from their answers), answer (the answers under a reasoning "
                "strategy such as cot), or auto: reasoning wherever the run holds any."
            ),
        ] = "auto",
        context: Annotated[
            str,
            typer.Option(
                help="From a run: the task context the judge sees. own: the trace's own prompt "
                "(with its condition's anchor or framing); swapped: the same item's prompt in the "
                "mirror condition (first with last); none: withheld. The last two are controls "
                "for a difference between conditions that the context alone makes."
            ),
        ] = "own",
        only: Annotated[
            Path | None,
            typer.Option(
                help="A file of trace ids, one per line (as audit-gate --flipped-out writes): "
                "audit those alone. The campaign is named SOURCE-FILE-HASH (HASH: of the ids, so "
                "another list is another campaign) unless --name says."
            ),
        ] = None,
        name: Annotated[
            str | None, typer.Option(help="Campaign name (default from the source).")
        ] = None,
        output_dir: Annotated[Path, typer.Option(help="Where runs go.")] = Path("runs"),
        run_id: Annotated[str, typer.Option(help="Run id under <output-dir>/<name>/.")] = "default",
        budget: Annotated[float | None, typer.Option(help="USD the audit may spend.")] = None,
    ) -> None:
        """Audit reasoning traces for anchoring, confirmation, availability and representativeness
        with an LLM judge (seed 003): one judge call per trace, validated strictly, retried once
        with the validation error, escalated for review when it fails twice. Resumable like
        `run` (run the same command again, or `orchestrator run RUN_DIR`). Exit codes as `run`."""

        settings: dict[str, Any] = {"allow_unauditable": allow_unauditable, "min_steps": min_steps}
        if strategy:
            settings["strategies"] = strategy
        if context != "own":
            settings["context"] = context
        if traces != "auto":
            settings["traces"] = traces
        if only is not None:
            settings["only"] = only
        try:
            campaign = audit_campaign(
                source,
                judge,
                screener,
                name=name,
                output_dir=output_dir,
                run_id=run_id,
                temperature=temperature,
                max_tokens=max_tokens,
                job_settings=settings,
            )
        except UserError as exc:
            cli.fail(exc)
        cli.run_and_report(campaign, budget=budget)

    @app.command()
    def review(
        audit_dir: Annotated[Path, typer.Argument(help="An audit run folder.")],
        include_all: Annotated[
            bool, typer.Option("--all", help="Also traces the judge passed.")
        ] = False,
        blind: Annotated[
            bool,
            typer.Option(
                help="Judge each trace before seeing the judge's audit (shown once yours is "
                "stored), in a random order that does not give its verdict away."
            ),
        ] = False,
        passed_sample: Annotated[
            int,
            typer.Option(
                min=0,
                help="Add this many traces the judge passed, drawn at random, to the queue: "
                "agreement measured on the judge's flags alone cannot see what it missed.",
            ),
        ] = 0,
        sample_seed: Annotated[
            int, typer.Option(help="Seed of the passed sample and of the blind order.")
        ] = 0,
        reviewer: Annotated[
            str | None, typer.Option(help="Your name in the reviews file (default $USER).")
        ] = None,
    ) -> None:
        """Go through escalated and flagged traces in the terminal: see the trace and the judge's
        output, record per bias biased / not biased / unsure (and a score) and a note. Stored in
        AUDIT_DIR/reviews.ndjson, beside the judge's output; run again to go on where you left.
        For an unanchored, unselected measure of judge alignment: --blind --passed-sample N."""
        import os

        from orchestrator.studies.trace_audit.alignment import review_summary
        from orchestrator.studies.trace_audit.records import audit_records, open_audit
        from orchestrator.studies.trace_audit.review import DEFAULT_INCLUDE, REVIEWS, read_reviews
        from orchestrator.studies.trace_audit.review import (
            review as session,
        )

        try:
            records = audit_records(open_audit(audit_dir))
        except UserError as exc:
            cli.fail(exc)
        include = DEFAULT_INCLUDE | ({"passed"} if include_all else set())
        who = reviewer or os.environ.get("USER") or "reviewer"
        try:
            session(
                audit_dir,
                records,
                cli.console,
                input,
                who,
                include=include,
                blind=blind,
                passed_sample=passed_sample,
                seed=sample_seed,
            )
        except UserError as exc:
            cli.fail(exc)
        except KeyboardInterrupt:
            cli.console.print("\nstopped; what was stored is kept. run the same command to go on.")
            raise typer.Exit(130) from None
        # how far people and the judge agree, over every review so far (seed 003: judge drift)
        summary = review_summary(records, read_reviews(audit_dir / REVIEWS))
        for key, text in (
            ("alignment", "reviewers agree with the judge's flag (score 1-2)"),
            ("blind_alignment", "in blind reviews, not anchored on the judge's audit"),
        ):
            shown = [
                f"{bias} {a['agreed']} of {a['compared']}"
                for bias, a in summary[key].items()
                if a["compared"]
            ]
            if shown:
                cli.console.print(f"{text}: " + ", ".join(shown))
        missed = [
            f"{bias} {a['person_only']} of {a['compared']} "
            f"(95% CI {100 * a['miss_ci_low']:.0f}-{100 * a['miss_ci_high']:.0f}%)"
            for bias, a in summary["passed_sample"].items()
            if a["compared"]
        ]
        if missed:
            cli.console.print(
                "in the passed traces sampled at random, reviewers found a bias the judge "
                "passed: " + ", ".join(missed)
            )

    @app.command()
    def calibrate(
        audit_dir: Annotated[
            Path,
            typer.Argument(help="An audit run of a golden set (traces with reference labels)."),
        ],
        target_risk: Annotated[
            float, typer.Option(help="Share of truly biased traces you accept to miss, per bias.")
        ] = 0.1,
        low: Annotated[
            float, typer.Option(help="Kappa below this is reported as low agreement.")
        ] = 0.4,
    ) -> None:
        """The judge against the golden set's labels, per bias: Cohen's kappa (quadratic-weighted
        on the 1-5 scores, plain on the critical flags) with 95% CIs, confusion matrices, where
        agreement is low, and the review threshold that keeps misses under --target-risk.
        Written to AUDIT_DIR/calibration/."""
        from orchestrator.studies.trace_audit.calibrate import run_calibration

        try:
            run_calibration(audit_dir, target_risk, low, cli.console)
        except UserError as exc:
            cli.fail(exc)

    @app.command("audit-gate")
    def audit_gate(
        audit_dir: Annotated[Path, typer.Argument(help="The new audit run of the golden set.")],
        baseline: Annotated[Path, typer.Option(help="The accepted audit run to compare with.")],
        baseline_again: Annotated[
            list[Path] | None,
            typer.Option(
                help="Another audit run of the same golden set by the baseline's judge; give it "
                "two or more times. From how far the baseline judge's own runs move apart, a "
                "tolerance per bias is learned (a t prediction bound, Bonferroni over the "
                "biases): a catch failure must then also rise beyond it, a shift beyond the "
                "larger of it and --tolerance, both against the baseline runs' mean. For a judge "
                "whose whole runs drift (a shift of every score from one run to the next), "
                "which --alpha does not cover: with two re-audits, a run-to-run SD of 0.2 gives "
                "tolerances of about 1.5 (catches) and 4 (shifts), with four about 0.9 and 1.5."
            ),
        ] = None,
        tolerance: Annotated[
            float,
            typer.Option(
                help="The smallest change of a bias's mean score worth failing for: a shift fails "
                "when it is significant and its estimate is beyond this."
            ),
        ] = 0.5,
        alpha: Annotated[
            float,
            typer.Option(
                help="The false-alarm rate: the chance an unchanged judge fails the gate, over "
                "every bias and every rule that can fail it, however often the judge catches or "
                "escalates (Holm per family: 0.8 of it to the catch tests, 0.15 to the shift "
                "tests, 0.05 to the escalation test). It takes the runs to vary trace by trace; "
                "a judge whose whole runs drift needs --baseline-again. A run lacking baseline "
                "traces fails whatever alpha."
            ),
        ] = 0.05,
        accept: Annotated[
            list[str] | None,
            typer.Option(
                help="BIAS=why: a mean shift of that bias is explained, so it does not fail."
            ),
        ] = None,
        flipped_out: Annotated[
            Path | None,
            typer.Option(
                help="Write the ids of the traces whose catch flipped (either way), one per "
                "line, to audit those again: orchestrator audit SOURCE --only FILE."
            ),
        ] = None,
        only: Annotated[
            Path | None,
            typer.Option(
                help="A file of trace ids, one per line: compare those alone on both sides, "
                "with the same tests. Traces chosen because they flipped regress to the mean: "
                "about 4 in 10 of an unchanged judge's lost catches are lost again on a "
                "re-audit, measured against the run they were chosen on, so a flip that "
                "persists is no proof. For a fair reading, re-audit those traces with the "
                "baseline's judge too and pass that run as --baseline."
            ),
        ] = None,
    ) -> None:
        """A regression gate for CI, built as tests: per bias, an exact one-sided sign-flip test
        of the reference-flagged golden traces' scores (higher now: caught less), and a paired
        t-test of the mean score's shift; over the traces, an exact test of escalating more.
        An escalated trace (a person reviews it) is neither a catch nor a miss: it is left out
        of the catches and listed. Each family is Holm-adjusted so an unchanged judge fails with
        probability at most --alpha. Exit 1 on flagged scores significantly higher with more
        catches lost than gained (a bias no longer caught at all included), on significantly
        more escalations, on a significant shift beyond --tolerance without an --accept
        explanation, or on baseline traces missing from this run; exit 0 otherwise (2: bad
        input). What it cannot check (a bias with nothing to compare) is printed. Writes
        AUDIT_DIR/gate.json."""
        from orchestrator.studies.trace_audit.calibrate import run_gate

        try:
            code = run_gate(
                audit_dir,
                baseline,
                tolerance,
                accept or [],
                cli.console,
                alpha=alpha,
                flipped_out=flipped_out,
                only=only,
                again=baseline_again or [],
            )
        except UserError as exc:
            cli.fail(exc)
        raise typer.Exit(code)

"""The audit's report section: dispositions, score distributions per bias (table and figure),
agreement with a golden set where the traces carry labels, and scores by the source run's
conditions where the traces came from a run."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.report.format import fmt
from orchestrator.report.plots import finish, plt
from orchestrator.studies.base import ReportPart, Section

NOTE = (
    "One judge call per trace (seed 003's prompt, its placeholders filled; the evidence the "
    "model had is listed under the task context, which the template has no place for). An "
    "answer counts only once validated against the prompt's own schema (each bias once, "
    "scores 1-5, quotes verbatim from the trace, the critical flag true exactly when a score "
    "is 1 or 2); a failed validation is retried once with the error appended, and a second "
    "failure is escalated to people (`orchestrator review`), never scored. Passed: validated, "
    "no score of 1-2, or cleared by the screener (then neither judged nor reviewed: "
    "`calibrate` counts such a trace as a miss where the golden set flags it); flagged: "
    "validated with a score of 1-2. "
    "Escalation rate: escalated / traces sent to the judge; critical-failure rate: flagged / "
    "validated audits; both with Wilson 95% intervals on the effective number of traces, "
    "given that the traces of one item (the samples and option orders of one prompt of a "
    "run) are alike: it is the number of items where they always agree, the number of traces "
    "where each item has one. Means are of the items' mean scores, with t-intervals over "
    "items; a traces file's trace is an item of its own."
)
CONDITION_NOTE = (
    "Traces taken from a run, joined back to that run's conditions: the judge's mean "
    "score per bias in each condition and the last condition minus the first, with its 95% "
    "CI and unadjusted p from a paired t over the items (the test column names it and the "
    "number of items; an experiment of one item, or items whose differences do not vary, "
    "has no test). The item is the unit, not the trace: an item's traces (its samples "
    "and option orders) are averaged per condition first, so a model at T=0 that writes one "
    "trace ten times counts it once (the units column says when every item's traces were "
    "identical), and the test does not take copies for evidence. Where a campaign's item "
    "sample put some items in one condition only, the test is CR2 by item (Bell-McCaffrey "
    "df), which is the paired t where every item is in both. A lower score is more biased "
    "reasoning, so an anchoring bias that works shows as a negative difference on the "
    "anchoring experiments. The judge is not blind to the condition: with the `own` context its task "
    "context is the source prompt, which carries the condition's anchor or framing, and its "
    "profile names the bias the experiment probes, so a difference can come from the "
    "context alone. Audit the same run with `--context swapped` (each trace judged with "
    "the same item's prompt in the mirror condition, first with last) or `--context none` "
    "(withheld) as a control: a difference that keeps its sign when the contexts are "
    "swapped lies in the traces; one that follows the context came from it."
)


def _rate(r: dict, stem: str, low: str, high: str) -> str:
    if r[stem] is None:
        return "-"
    return f"{100 * r[stem]:.1f}% [{fmt(100 * r[low], 3)}, {fmt(100 * r[high], 3)}]"


def _disposition_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "judge": f"{r['model']} [{r['modelKey']}]",
            "traces": str(r["traces"]),
            "passed": f"{r['passed']} ({r['screened_out']} by the screener)",
            "flagged": str(r["flagged"]),
            "escalated": str(r["escalated"]),
            "not auditable": str(r["not_auditable"]),
            "escalation rate [95% CI]": _rate(
                r, "escalation_rate", "escalation_ci_low", "escalation_ci_high"
            ),
            "critical-failure rate [95% CI]": _rate(
                r, "critical_rate", "critical_ci_low", "critical_ci_high"
            ),
        }
        for r in table.iter_rows(named=True)
    ]


def _score_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "judge": r["model"],
            "bias": r["bias"],
            "validated (items)": f"{r['n']} ({r.get('items', '-')})",
            "scores 1 / 2 / 3 / 4 / 5": " / ".join(str(r[f"score_{s}"]) for s in range(1, 6)),
            "mean [95% CI]": f"{fmt(r['mean'])} [{fmt(r['mean_ci_low'])}, {fmt(r['mean_ci_high'])}]",
            "share 1-2": "-"
            if r["critical_share"] is None
            else f"{100 * r['critical_share']:.1f}%",
        }
        for r in table.iter_rows(named=True)
    ]


def _agreement_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    rows = []
    for r in table.iter_rows(named=True):
        rows.append(
            {
                k: fmt(v) if isinstance(v, float) else ("-" if v is None else str(v))
                for k, v in r.items()
                if k != "modelKey"
            }
        )
    return rows


def _test(r: dict) -> str:
    """What the difference was tested with, over how many items."""
    method = r.get("method")
    if method is None:
        return "-"
    if r["items"] < 2:
        return "one item: no test"
    if method == "paired t":
        text = f"paired t over {r['paired_items']} items"
    else:
        text = f"CR2 by item over {r['items']} items ({r['paired_items']} in both)"
    p = r.get("p")
    return text if p is not None and p == p else f"{text}: no variation, no test"


def _units(r: dict) -> str:
    """Items and traces, and what the traces were: one text repeated, or of unknown items."""
    text = f"{r['items']} items, {r['traces']} traces"
    repeated, identical = r.get("repeated_cells") or 0, r.get("identical_cells") or 0
    if repeated and identical == repeated:
        text += "; every item's traces identical (a deterministic source): each counted once"
    elif identical:
        text += f"; {identical} of {repeated} item x condition cells with identical traces"
    if r.get("unknown_items"):
        text += f"; {r['unknown_items']} traces of unknown items, each counted as one"
    return text


def _condition_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "source model": r["source_model"],
            "strategy": r["strategy"],
            "experiment": r["experiment"],
            "bias": r["bias"],
            "judge's context": r.get("context") or "own",
            "units": _units(r),
            "mean score per condition": r["conditions"],
            "difference (last - first) [95% CI]": f"{fmt(r['difference'])} [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
            "test": _test(r),
            "p": fmt(r["p"], 2),
        }
        for r in table.iter_rows(named=True)
    ]


def score_figure(table: pl.DataFrame, png: Path | None) -> str:
    """Stacked shares of scores 1-5 per bias (first judge; red = biased, green = mitigated)."""
    first = table.filter(pl.col("modelKey") == table["modelKey"][0])
    fig, ax = plt.subplots(figsize=(6.5, 2.6))
    colours = ("#b2182b", "#ef8a62", "#cccccc", "#67a9cf", "#2166ac")
    left = [0.0] * first.height
    for s, colour in zip(range(1, 6), colours, strict=True):
        shares = [r[f"score_{s}"] / r["n"] if r["n"] else 0.0 for r in first.iter_rows(named=True)]
        ax.barh(first["bias"].to_list(), shares, left=left, color=colour, label=str(s))
        left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("share of validated audits", fontsize=8)
    ax.set_title(
        f"judge scores per bias ({first['model'][0]}); 1 = highly susceptible",
        fontsize=9,
        loc="left",
    )
    ax.legend(
        fontsize=7,
        ncol=5,
        title="score",
        title_fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.3),
    )
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    return finish(fig, png)


def report(tables: dict[str, pl.DataFrame], out_dir: Path) -> ReportPart:
    part = ReportPart()
    part.sections.append(
        Section("Trace audit: dispositions", NOTE, _disposition_rows(tables["audit_dispositions"]))
    )
    scores = tables["audit_scores"]
    if scores.height:
        svg = score_figure(scores, out_dir / "audit_scores.png")
        part.sections.append(
            Section(
                "Trace audit: scores per bias",
                "Validated audits only.",
                _score_rows(scores),
                (("audit_scores", svg),),
            )
        )
    if tables.get("audit_agreement") is not None and tables["audit_agreement"].height:
        part.sections.append(
            Section(
                "Trace audit: agreement with the golden set",
                (
                    "Per bias: Cohen's kappa, quadratic-weighted on the 1-5 scores and plain on the critical "
                    "flags (score 1-2), with 95% CIs; traces the judge left unvalidated are counted as "
                    "missing, not as agreement. `orchestrator calibrate` adds confusion matrices and "
                    "review thresholds."
                ),
                _agreement_rows(tables["audit_agreement"]),
            )
        )
    if tables.get("audit_conditions") is not None and tables["audit_conditions"].height:
        part.sections.append(
            Section(
                "Trace audit: scores by the source run's condition",
                CONDITION_NOTE,
                _condition_rows(tables["audit_conditions"]),
            )
        )
    return part

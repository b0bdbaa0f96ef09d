"""The judge-history report section: the preregistered outcomes per model, a per-task table,
and a per-task figure."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.engine.names import model_key
from orchestrator.report.format import fmt
from orchestrator.studies.base import Figure, ReportPart, Section
from orchestrator.studies.judge_history import plots

JUDGE_NOTE = (
    "Signed prior-score pull per task = sign(prior - blind) x (anchor - blind) on condition "
    "means; positive = toward the displayed prior. This preregistered headline takes its sign "
    "from the noisy blind mean it measures from, so with no anchoring it is biased upward where "
    "blind means sit near the displayed prior; where they sit near gold, as on the seed's tasks "
    "with the prior 3 points away, the bias is about 0 (under 0.02 for judge SD up to 1) and the "
    "two pull columns agree. The gold-signed pull, sign(prior - gold) x (anchor - blind), takes "
    "its sign from the design: 0 in expectation with no anchoring (a blind mean past the prior "
    "that moves back toward it counts as negative). Anchor vs framing, anchor - framing, is "
    "signed both ways alike (by prior - framing, preregistered, and by prior - gold). Each pull "
    "gets a mean with a 95% t-interval over tasks (a percentile bootstrap covered 85-89% in "
    "simulations of this design), a median with the narrowest order-statistic interval reaching "
    "95% (over 8 tasks [min, max], 99.2%; its level is shown) and a Wilcoxon signed-rank test. "
    "Deviation from the preregistration: correction harm counts, over all tasks, those whose "
    "anchored mean is farther from gold than the blind mean, beside those nearer and tied. The "
    "preregistered wording counts only among tasks where blind is at least as close, a set "
    "chosen by the outcome: farther / (farther + tied) is 100% whenever no task ties, whatever "
    "the anchoring, so it is not shown as a rate (its counts are in the table). With no "
    "anchoring farther and nearer are equally likely: compare harm with help, not with 0. "
    "Verdict flip rate is the published scorer's (verdict of each task's mean score, 4 or more "
    "= pass, blind vs history-anchor, share of tasks); beside it the count from majority "
    "verdicts. SD within task: mean over tasks of each condition's SD across repetitions. All "
    "p-values are unadjusted (across pulls, models and outcomes). A model is complete only when "
    "every task has the same number of valid judgments in all three conditions; nothing is "
    "imputed."
)


def _interval(r: dict, stem: str) -> str:
    return f"{fmt(r[stem])} [{fmt(r[stem + '_ci_low'])}, {fmt(r[stem + '_ci_high'])}]"


def _judge_rows(summary: pl.DataFrame) -> list[dict[str, str]]:
    rows = []
    for r in summary.iter_rows(named=True):
        level = r["median_pull_ci_level"]
        rows.append(
            {
                "model": f"{r['model']} [{r['modelKey']}]",
                "signed prior-score pull (preregistered), mean [95% CI]": _interval(r, "mean_pull"),
                "median [CI]": f"{_interval(r, 'median_pull')} ({fmt(None if level is None else 100 * level, 3)}%)",
                "Wilcoxon p": fmt(r["wilcoxon_p"], 2),
                "gold-signed pull, mean [95% CI]": _interval(r, "mean_pull_gold_signed"),
                "gold-signed Wilcoxon p": fmt(r["wilcoxon_p_gold_signed"], 2),
                "anchor vs framing (preregistered)": fmt(r["mean_anchor_vs_framing"]),
                "anchor vs framing, gold-signed": fmt(r["mean_anchor_vs_framing_gold_signed"]),
                "abs. error blind / framing / anchor": " / ".join(
                    fmt(r[f"abs_error_{c}"]) for c in ("blind", "framing", "anchor")
                ),
                "SD within task, blind / framing / anchor": " / ".join(
                    fmt(r[f"mean_sd_{c}"]) for c in ("blind", "framing", "anchor")
                ),
                "correction harm: farther / nearer / tied": f"{r['correction_harm']} / {r['correction_helped']} / "
                f"{r['correction_tied']} of {r['correction_tasks']}",
                "verdict flip rate (of mean scores)": f"{fmt(r['verdict_flip_rate'], 2)} ({r['verdict_flips_by_mean']}/{r['verdict_flips_by_mean_of']})",
                "verdict flips (majority verdict)": f"{r['verdict_flips']}/{r['verdict_flips_of']}",
                "inconsistent verdicts": f"{r['inconsistent_verdicts']}/{r['valid_judgments']}",
                "complete": "yes" if r["complete"] else f"NO: {r['incomplete']}",
            }
        )
    return rows


def _judge_task_rows(tasks: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "model": r["model"],
            "task": r["experimentSlug"],
            "gold": str(r["gold"]),
            "prior": str(r["prior"]),
            "blind": f"{fmt(r['blind'])} ({r['n_blind'] or 0})",
            "framing": f"{fmt(r['framing'])} ({r['n_framing'] or 0})",
            "anchor": f"{fmt(r['anchor'])} ({r['n_anchor'] or 0})",
            "signed pull": fmt(r["pull"]),
            "gold-signed pull": fmt(r["pull_gold_signed"]),
        }
        for r in tasks.iter_rows(named=True)
    ]


def report(summary: pl.DataFrame, tasks: pl.DataFrame, out_dir: Path) -> ReportPart:
    part = ReportPart()
    if not summary.height:
        return part
    part.sections.append(Section("Judge history", JUDGE_NOTE, _judge_rows(summary)))
    part.sections.append(
        Section(
            "Judge history per task",
            "Condition means (valid judgments per "
            "condition in brackets), the displayed prior, gold, and the task's "
            "signed pull, preregistered and gold-signed.",
            _judge_task_rows(tasks),
        )
    )
    for r in summary.iter_rows(named=True):
        model_tasks = tasks.filter(pl.col("modelKey") == r["modelKey"])
        title = f"judge history · {r['model']} [{r['modelKey']}]: mean score per task and condition"
        name = f"judge-{model_key(r['modelKey'], 'results.ndjson')}"  # a name, never a path
        part.figures.append(
            Figure(title, name, plots.judge_tasks(model_tasks, title, out_dir / f"{name}.png"))
        )
    return part

"""The judge-history report section: the preregistered outcomes per model, a per-task table,
and a per-task figure."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.report.format import fmt
from orchestrator.studies.base import Figure, ReportPart, Section
from orchestrator.studies.judge_history import plots

JUDGE_NOTE = ("Signed prior-score pull per task = sign(prior - blind) x (anchor - blind) on "
              "condition means; positive = toward the displayed prior. Mean and median across "
              "tasks with percentile-bootstrap CIs (10,000 resamples over tasks) and a Wilcoxon "
              "signed-rank test. A model is complete only when every task has the same number "
              "of valid judgments in all three conditions; nothing is imputed.")


def _judge_rows(summary: pl.DataFrame) -> list[dict[str, str]]:
    rows = []
    for r in summary.iter_rows(named=True):
        rows.append({
            "model": f"{r['model']} [{r['modelKey']}]",
            "signed prior-score pull, mean [95% CI]": f"{fmt(r['mean_pull'])} [{fmt(r['mean_pull_ci_low'])}, {fmt(r['mean_pull_ci_high'])}]",
            "median [95% CI]": f"{fmt(r['median_pull'])} [{fmt(r['median_pull_ci_low'])}, {fmt(r['median_pull_ci_high'])}]",
            "Wilcoxon p": fmt(r["wilcoxon_p"], 2), "gold-signed pull": fmt(r["mean_pull_gold_signed"]),
            "anchor vs framing": fmt(r["mean_anchor_vs_framing"]),
            "abs. error blind / framing / anchor": " / ".join(fmt(r[f"abs_error_{c}"]) for c in ("blind", "framing", "anchor")),
            "correction harm": f"{r['correction_harm']}/{r['correction_harm_of']}",
            "verdict flips": f"{r['verdict_flips']}/{r['verdict_flips_of']}",
            "inconsistent verdicts": f"{r['inconsistent_verdicts']}/{r['valid_judgments']}",
            "complete": "yes" if r["complete"] else
                        f"NO: {r['tasks_with_all_conditions']}/{r['tasks_planned']} tasks have all conditions, counts differ"})
    return rows


def _judge_task_rows(tasks: pl.DataFrame) -> list[dict[str, str]]:
    return [{"model": r["model"], "task": r["experimentSlug"], "gold": str(r["gold"]), "prior": str(r["prior"]),
             "blind": f"{fmt(r['blind'])} ({r['n_blind'] or 0})", "framing": f"{fmt(r['framing'])} ({r['n_framing'] or 0})",
             "anchor": f"{fmt(r['anchor'])} ({r['n_anchor'] or 0})", "signed pull": fmt(r["pull"])}
            for r in tasks.iter_rows(named=True)]


def report(summary: pl.DataFrame, tasks: pl.DataFrame, out_dir: Path) -> ReportPart:
    part = ReportPart()
    if not summary.height:
        return part
    part.sections.append(Section("Judge history", JUDGE_NOTE, _judge_rows(summary)))
    part.sections.append(Section("Judge history per task", "Condition means (valid judgments per "
                                 "condition in brackets), the displayed prior, gold, and the task's "
                                 "signed pull.", _judge_task_rows(tasks)))
    for r in summary.iter_rows(named=True):
        model_tasks = tasks.filter(pl.col("modelKey") == r["modelKey"])
        title = f"judge history · {r['model']} [{r['modelKey']}]: mean score per task and condition"
        name = f"judge-{r['modelKey']}"
        part.figures.append(Figure(title, name, plots.judge_tasks(model_tasks, title, out_dir / f"{name}.png")))
    return part

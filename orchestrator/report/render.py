"""`orchestrator report`: a Markdown report and one self-contained HTML file for a run.

Every number comes from summary rows, which name the run, the model identity and the counts.
"""
from __future__ import annotations

import html
import math
import re
from pathlib import Path

import polars as pl

from orchestrator.analysis.load import Run, final_records
from orchestrator.analysis.summary import analyze
from orchestrator.report import plots

CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f0f3f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
.flag{color:#a33;font-size:12px}.meta{color:#555;font-size:13px}svg{max-width:100%;height:auto}"""


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}"


def _effect_rows(summary: pl.DataFrame) -> list[dict[str, str]]:
    rows = []
    for r in summary.iter_rows(named=True):
        share = r["metric_type"] == "choice-share-difference"
        rows.append({
            "experiment": r["experimentSlug"], "model": f"{r['model']} [{r['modelKey']}]",
            "strategy": r["strategy"],
            "condition 0": fmt(r["stat_0"]) + (" share" if share else " mean"),
            "condition 1": fmt(r["stat_1"]) + (" share" if share else " mean"),
            "effect [95% CI]": f"{fmt(r['effect'])} [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
            "p": fmt(r["p_value"], 2), "valid n (0 / 1)": f"{r['n_valid_0']} / {r['n_valid_1']}",
            "flags": "; ".join(r["flags"]) or "none"})
    return rows


def _header(run: Run, records: int) -> list[tuple[str, str]]:
    m = run.manifest
    return [("campaign / run", f"{m['campaign']} / {m['runId']}"), ("started", m["createdAt"]),
            ("software", m["software"]), ("plan hash", m["plan"]["hash"]),
            ("results", f"{run.results} ({records:,} final records)"),
            ("models", ", ".join(f"{label} [{key}]" for key, label in run.models.items()))]


def _distribution_sets(run: Run, summary: pl.DataFrame):
    answers = (final_records(run).filter(pl.col("status") == "ok")
               .select("job", "experimentSlug", "strategy", "modelKey", "conditionIndex", "value", "choice")
               .collect())
    for r in summary.iter_rows(named=True):
        exp = run.jobs[r["job"]].experiment(r["experimentSlug"])
        labels = pl.DataFrame({"conditionIndex": [c.index for c in exp.conditions],
                               "label": [c.label for c in exp.conditions]})
        part = answers.filter((pl.col("job") == r["job"]) & (pl.col("experimentSlug") == r["experimentSlug"])
                              & (pl.col("strategy") == r["strategy"]) & (pl.col("modelKey") == r["modelKey"]))
        kind = "choice" if r["metric_type"] == "choice-share-difference" else "value"
        yield r, part.join(labels, on="conditionIndex", how="left", coalesce=True), kind


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


def _bsi_rows(summary: pl.DataFrame) -> list[dict[str, str]]:
    star = lambda q: f"{fmt(q, 2)}{' *' if q is not None and q < 0.05 else ''}"  # noqa: E731
    return [{"strategy": r["strategy"], "model": f"{r['model']} [{r['modelKey']}]", "bias": r["experimentSlug"],
             "K": str(r["K"]), "BSI ± σ_tot": f"{fmt(r['bsi'])} ± {fmt(r['sigma_tot'])}",
             "σ_stat / σ_sys": f"{fmt(r['sigma_stat'])} / {fmt(r['sigma_sys'])}", "signed BSI": fmt(r["bsi_signed"]),
             "variant t-test q": star(r["q_variant"]),
             "mixed model q (OR or Δ)": f"{star(r['q_mixed'])} ({fmt(r['odds_ratio'] if r['odds_ratio'] is not None else r['mixed_effect'], 3)})",
             "robust check p": fmt(r["robust_p"], 2), "notes": r["reason"] or ""}
            for r in summary.iter_rows(named=True)]


def _debias_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [{"bias": r["experimentSlug"], "model": r["model"], "strategy": r["strategy"],
             "BSI baseline": fmt(r["bsi_baseline"]), "BSI with strategy": fmt(r["bsi"]),
             "reduction": "–" if r["reduction"] is None else f"{r['reduction']:.0%}"}
            for r in table.iter_rows(named=True)]


def _parse_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [{"model": r["model"], "strategy": r["strategy"],
             "parse errors control": f"{r['pe_C']}/{r['rec_C']}", "parse errors treatment": f"{r['pe_T']}/{r['rec_T']}",
             "p (failures depend on condition)": fmt(r["p_depends_on_condition"], 2)}
            for r in table.iter_rows(named=True)]


JUDGE_NOTE = ("Signed prior-score pull per task = sign(prior - blind) x (anchor - blind) on "
              "condition means; positive = toward the displayed prior. Mean and median across "
              "tasks with percentile-bootstrap CIs (10,000 resamples over tasks) and a Wilcoxon "
              "signed-rank test. A model is complete only when every task has the same number "
              "of valid judgments in all three conditions; nothing is imputed.")
PAIRED_NOTE = ("Positive effects are in the direction the bias predicts. Means use Welch's t; "
               "shares use Newcombe's interval for a difference of proportions.")
BSI_NOTE = ("BSI per variant: |mean_T - mean_C| / |anchor - mean_C| (numbers) or |p_T - p_C| (share "
            "choosing the bias-predicted option, scored by role whatever position it was shown in). "
            "σ_stat: bootstrap SD (10,000 resamples, seeded) averaged over variants; σ_sys: SD across "
            "the K variants; σ_tot in quadrature. Variant-level one-sample t-test on the signed BSI and "
            "a trial-level mixed model (random intercept per variant; odds ratio for choices, pooled "
            "normalised shift for numbers), each Benjamini-Hochberg corrected across bias x model "
            "within a strategy (* q < 0.05); robust check: pooled model with variant-clustered errors.")


def write_report(run_dir: Path) -> dict[str, Path]:
    result = analyze(run_dir)
    run, summary = result.run, result.paired
    out_dir = run_dir / "report"
    out_dir.mkdir(exist_ok=True)
    records = final_records(run).select(pl.len()).collect().item()
    sections: list[tuple[str, str, list[dict[str, str]], list[tuple[str, str]]]] = []
    if result.judge.height:
        sections.append(("Judge history", JUDGE_NOTE, _judge_rows(result.judge), []))
        sections.append(("Judge history per task", "Condition means (valid judgments per condition in "
                         "brackets), the displayed prior, gold, and the task's signed pull.",
                         _judge_task_rows(result.judge_tasks), []))
    if summary.height:
        sections.append(("Effects", PAIRED_NOTE, _effect_rows(summary),
                         [("forest", plots.forest(summary, out_dir / "forest.png"))]))
    if result.bsi.height:
        first = result.bsi["strategy"][0]
        main = result.bsi.filter(pl.col("strategy") == ("baseline" if "baseline" in result.bsi["strategy"] else first))
        sections.append(("Bias Strength Index", BSI_NOTE, _bsi_rows(result.bsi),
                         [("bsi-heatmap", plots.bsi_heatmap(main, out_dir / "bsi-heatmap.png")),
                          ("bsi-uncertainty", plots.bsi_uncertainty(main, out_dir / "bsi-uncertainty.png"))]))
        if result.bsi_debiasing.height:
            sections.append(("Debiasing", "BSI under each strategy against the baseline; reduction = "
                             "1 - BSI_strategy / BSI_baseline.", _debias_rows(result.bsi_debiasing), []))
        sections.append(("Parse failures by condition", "Failures that depend on the condition would bias "
                         "the BSI (chi-square, or Fisher's exact test for small counts).",
                         _parse_rows(result.bsi_parse), []))
    figures = []
    for r, values, kind in _distribution_sets(run, summary):
        name = re.sub(r"[^a-z0-9-]+", "-", f"{r['experimentSlug']}-{r['modelKey']}-{r['strategy']}".lower())
        title = f"{r['experimentSlug']} · {r['model']} [{r['modelKey']}] · {r['strategy']}"
        figures.append((title, name, plots.distribution(values, title, kind, out_dir / f"{name}.png")))
    for r in result.judge.iter_rows(named=True):
        tasks = result.judge_tasks.filter(pl.col("modelKey") == r["modelKey"])
        title = f"judge history · {r['model']} [{r['modelKey']}]: mean score per task and condition"
        name = f"judge-{r['modelKey']}"
        figures.append((title, name, plots.judge_tasks(tasks, title, out_dir / f"{name}.png")))
    header = _header(run, records)
    md = out_dir / "report.md"
    md.write_text(_markdown(header, sections, figures), encoding="utf-8")
    page = out_dir / "report.html"
    page.write_text(_html(header, sections, figures), encoding="utf-8")
    return {"markdown": md, "html": page}


def _md_table(rows: list[dict[str, str]]) -> list[str]:
    if not rows:
        return []
    cols = list(rows[0])
    return (["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            + ["| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |" for r in rows])


def _html_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    e = html.escape
    cols = list(rows[0])
    out = ["<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(
            f"<td class='{'flag' if c == 'flags' and r[c] != 'none' else ''}'>{e(r[c])}</td>" for c in cols) + "</tr>")
    return "".join(out) + "</table>"


def _markdown(header, sections, figures) -> str:
    lines = ["# Bias benchmark report", ""]
    lines += [f"- **{k}**: {v}" for k, v in header]
    for heading, note, rows, inline in sections:
        lines += ["", f"## {heading}", "", note, "", *_md_table(rows)]
        lines += [x for name, _ in inline for x in ("", f"![{name}]({name}.png)")]
    if figures:
        lines += ["", "## Figures", ""]
    for title, name, _ in figures:
        lines += [f"### {title}", "", f"![{title}]({name}.png)", ""]
    return "\n".join(lines) + "\n"


def _html(header, sections, figures) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Bias benchmark report</title>"
             f"<style>{CSS}</style></head><body><h1>Bias benchmark report</h1><table class='meta'>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in header]
    parts.append("</table>")
    for heading, note, rows, inline in sections:
        parts.append(f"<h2>{e(heading)}</h2><p>{e(note)}</p>{_html_table(rows)}")
        parts += [svg for _, svg in inline]
    if figures:
        parts.append("<h2>Figures</h2>")
    parts += [f"<h3>{e(title)}</h3>{svg}" for title, _, svg in figures]
    parts.append("</body></html>")
    return "\n".join(parts)

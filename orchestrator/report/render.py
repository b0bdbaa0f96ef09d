"""`orchestrator report`: a Markdown report and one self-contained HTML file for a run.

Every number comes from summary rows, which name the run, the model identity and the counts.
"""
from __future__ import annotations

import html
import math
import re
from pathlib import Path

import polars as pl

from orchestrator.analysis.load import Run, final_records, open_run
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


def write_report(run_dir: Path) -> dict[str, Path]:
    summary, _ = analyze(run_dir)
    run = open_run(run_dir)
    out_dir = run_dir / "report"
    out_dir.mkdir(exist_ok=True)
    records = final_records(run).select(pl.len()).collect().item()
    header, rows = _header(run, records), _effect_rows(summary)
    forest_svg = plots.forest(summary, out_dir / "forest.png") if summary.height else ""
    dists = []
    for r, values, kind in _distribution_sets(run, summary):
        name = re.sub(r"[^a-z0-9-]+", "-", f"{r['experimentSlug']}-{r['modelKey']}-{r['strategy']}".lower())
        title = f"{r['experimentSlug']} · {r['model']} [{r['modelKey']}] · {r['strategy']}"
        dists.append((title, name, plots.distribution(values, title, kind, out_dir / f"{name}.png")))
    md = out_dir / "report.md"
    md.write_text(_markdown(header, rows, dists), encoding="utf-8")
    page = out_dir / "report.html"
    page.write_text(_html(header, rows, forest_svg, dists), encoding="utf-8")
    return {"markdown": md, "html": page}


def _markdown(header, rows, dists) -> str:
    lines = ["# Bias benchmark report", ""]
    lines += [f"- **{k}**: {v}" for k, v in header]
    lines += ["", "## Effects", "",
              "Positive effects are in the direction the bias predicts. Means use Welch's t; "
              "shares use Newcombe's interval for a difference of proportions.", ""]
    if rows:
        cols = list(rows[0])
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |" for r in rows]
    lines += ["", "![forest plot](forest.png)", "", "## Answer distributions", ""]
    for title, name, _ in dists:
        lines += [f"### {title}", "", f"![{title}]({name}.png)", ""]
    return "\n".join(lines) + "\n"


def _html(header, rows, forest_svg, dists) -> str:
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Bias benchmark report</title>"
             f"<style>{CSS}</style></head><body><h1>Bias benchmark report</h1><table class='meta'>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in header]
    parts.append("</table><h2>Effects</h2><p>Positive effects are in the direction the bias "
                 "predicts. Means: Welch's t; shares: Newcombe's interval.</p>")
    if rows:
        cols = list(rows[0])
        parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>")
        for r in rows:
            cells = "".join(f"<td class='{'flag' if c == 'flags' and r[c] != 'none' else 'num' if c in ('p', 'effect [95% CI]', 'valid n (0 / 1)') else ''}'>{e(r[c])}</td>" for c in cols)
            parts.append(f"<tr>{cells}</tr>")
        parts.append("</table>")
    parts.append(f"<h2>Forest plot</h2>{forest_svg}<h2>Answer distributions</h2>")
    parts += [f"<h3>{e(title)}</h3>{svg}" for title, _, svg in dists]
    parts.append("</body></html>")
    return "\n".join(parts)

"""`orchestrator report`: a Markdown report and one self-contained HTML file for a run.

The shell: a header naming the run, then each registered study's sections and figures in
registry order. Every number comes from summary rows, which name the run, the model identity
and the counts.
"""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from orchestrator.analysis.load import Run, final_records
from orchestrator.analysis.summary import analyze
from orchestrator.engine.files import folder_within, write_file
from orchestrator.studies import registered
from orchestrator.studies.base import Section

CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f0f3f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
.flag{color:#a33;font-size:12px}.meta{color:#555;font-size:13px}svg{max-width:100%;height:auto}"""
TITLE = "Bias benchmark report"


def _header(run: Run, records: int) -> list[tuple[str, str]]:
    m = run.manifest
    return [
        ("campaign / run", f"{m['campaign']} / {m['runId']}"),
        ("started", m["createdAt"]),
        ("software", m["software"]),
        ("plan hash", m["plan"]["hash"]),
        ("results", f"{run.results} ({records:,} final records)"),
        ("models", ", ".join(f"{label} [{key}]" for key, label in run.models.items())),
    ]


def write_report(run_dir: Path) -> dict[str, Path]:
    result = analyze(run_dir)
    run = result.run
    out_dir = folder_within(run_dir, run_dir / "report")  # never a link a received folder holds
    records = final_records(run).select(pl.len()).collect().item()
    sections, figures = [], []
    for study in registered():
        part = study.report(result.tables, run, out_dir)
        sections += part.sections + _deviations(study, part, run)
        figures += part.figures
    header = _header(run, records)
    md = write_file(out_dir / "report.md", _markdown(header, sections, figures).encode())
    page = write_file(out_dir / "report.html", _html(header, sections, figures).encode())
    return {"markdown": md, "html": page}


def _deviations(study, part, run: Run) -> list[Section]:
    """A study's departures from its seed's method, after its own sections, for the jobs that
    follow that seed: its built-in jobs. A user's own job in the study's format follows no seed
    document, so it gets none (the decoy menu of seed 000 is not theirs)."""
    seeded = _seeded_jobs(study, run) if part.sections and study.deviations else []
    if not seeded:
        return []
    return [
        Section(
            f"Deviations from {study.seed}",
            f"Where this analysis of job {', '.join(seeded)}, which follows that document, "
            "departs from its method, and why. Jobs of your own follow no seed: none apply.",
            [{"deviation": d.what, "why": d.why} for d in study.deviations],
        )
    ]


def _seeded_jobs(study, run: Run) -> list[str]:
    """The run's jobs of the study that follow its seed: a built-in job (under its name or a
    former one), or an edited copy of one (it shares experiments with it)."""
    from orchestrator.export import jobs_of_kind
    from orchestrator.spec.builtin import builtin_dir
    from orchestrator.spec.jobs import FORMER_NAMES, builtin_jobs, load_job, resolve_job_path

    names = {*builtin_jobs(), *FORMER_NAMES}
    slugs: set[str] = set()
    for name in builtin_jobs():
        try:
            job = load_job(resolve_job_path(name, builtin_dir("jobs")), [study])
        except Exception:  # noqa: BLE001 - another study's format: not this study's seed
            continue
        slugs |= {e.slug for e in job.experiments}
    return sorted(
        job_id
        for job_id, job in jobs_of_kind(run.manifest, study.kind).items()
        if job_id in names or slugs & {e.get("slug") for e in job.get("experiments", [])}
    )


def _md_table(rows: list[dict[str, str]]) -> list[str]:
    if not rows:
        return []
    cols = list(rows[0])
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + [
        "| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |" for r in rows
    ]


def _html_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    e = html.escape
    cols = list(rows[0])
    out = ["<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>"]
    for r in rows:
        out.append(
            "<tr>"
            + "".join(
                f"<td class='{'flag' if c == 'flags' and r[c] != 'none' else ''}'>{e(r[c])}</td>"
                for c in cols
            )
            + "</tr>"
        )
    return "".join(out) + "</table>"


def _markdown(header, sections, figures, title: str = TITLE) -> str:
    """The report as Markdown: a title, header rows (label, value), sections, figures. The
    run report and the campaign's trend report (nightly/trend.py) share it."""
    lines = [f"# {title}", ""]
    lines += [f"- **{k}**: {v}" for k, v in header]
    for heading, note, rows, inline in sections:
        lines += ["", f"## {heading}", "", note, "", *_md_table(rows)]
        lines += [x for name, _ in inline for x in ("", f"![{name}]({name}.png)")]
    if figures:
        lines += ["", "## Figures", ""]
    for caption, name, _ in figures:
        lines += [f"### {caption}", "", f"![{caption}]({name}.png)", ""]
    return "\n".join(lines) + "\n"


def _html(header, sections, figures, title: str = TITLE) -> str:
    """The same as one self-contained HTML page (figures inline as SVG)."""
    e = html.escape
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{e(title)}</h1><table class='meta'>"
    ]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in header]
    parts.append("</table>")
    for heading, note, rows, inline in sections:
        parts.append(f"<h2>{e(heading)}</h2><p>{e(note)}</p>{_html_table(rows)}")
        parts += [svg for _, svg in inline]
    if figures:
        parts.append("<h2>Figures</h2>")
    parts += [f"<h3>{e(caption)}</h3>{svg}" for caption, _, svg in figures]
    parts.append("</body></html>")
    return "\n".join(parts)

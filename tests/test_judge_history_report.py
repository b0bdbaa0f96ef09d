"""The judge-history report: its numbers against the exported judgments, dispersion, and no
-0 or float noise in print."""

from __future__ import annotations

import re
from io import StringIO

import numpy as np
import orjson
import polars as pl
import pytest
from rich.console import Console
from typer.testing import CliRunner

from orchestrator.analysis.summary import analyze
from orchestrator.cli import app
from orchestrator.report.format import fmt
from orchestrator.studies.judge_history.analysis import model_summary, task_outcomes
from orchestrator.studies.judge_history.report import report
from orchestrator.studies.judge_history.table import print_table
from tests.test_judge_history import JOB, _cond, _judge_run


def _md_rows(md: str, heading: str) -> list[dict[str, str]]:
    """The rows of the markdown table under `## heading`, as dicts by column name."""
    lines = md.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0].splitlines()
    table = [line for line in lines if line.startswith("| ")]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in table]
    return [dict(zip(cells[0], row, strict=True)) for row in cells[1:]]


def _exported_means(run_dir) -> dict[str, dict[tuple[str, str], list[int]]]:
    """Scores per (task, condition) of each model, from the study's own exported result JSON."""
    assert (
        CliRunner().invoke(app, ["export", str(run_dir), "--format", "judge-history"]).exit_code
        == 0
    )
    out = {}
    for path in (run_dir / "export" / "judge-history").glob("*.json"):
        scores: dict[tuple[str, str], list[int]] = {}
        for j in orjson.loads(path.read_bytes())["judgments"]:
            scores.setdefault((j["taskId"], j["condition"]), []).append(j["score"])
        out[path.stem.split("__")[1]] = scores
    return out


def _reported_run(tmp_path):
    """A judge run of two simulated models, its report in markdown and the scores of its exported
    result JSON. One judge's framing mean sits at the displayed prior, its anchored mean half way
    there: the preregistered anchor vs framing then takes its sign from noise."""
    outcome = _judge_run(tmp_path, pull=0.5, reps=3, extra="framing_pull = 1.0")
    result = CliRunner().invoke(app, ["report", str(outcome.run_dir)])
    assert result.exit_code == 0, result.output
    md = (outcome.run_dir / "report" / "report.md").read_text()
    return outcome.run_dir, md, _exported_means(outcome.run_dir)


def _close(cell: str, value: float) -> bool:
    """A report cell (3 significant digits) shows `value`."""
    return float(cell) == pytest.approx(value, rel=5.1e-3, abs=1e-12)


def test_the_report_and_terminal_show_both_anchor_vs_framing_versions(tmp_path):
    """Per model, the preregistered anchor vs framing and its gold-signed version, as the report
    shows them, against a computation from the exported result JSON and the seed's gold and prior
    scores alone; the terminal table shows both too."""
    run_dir, md, scores = _reported_run(tmp_path)
    judged = {e.slug: e.judged for e in JOB.experiments}
    rows = {r["model"].split(" [")[1].rstrip("]"): r for r in _md_rows(md, "Judge history")}
    assert len(rows) == len(scores) == 2
    for key, s in scores.items():
        framing = {t: np.mean(s[t, "history-framing"]) for t in judged}
        moved = {t: np.mean(s[t, "history-anchor"]) - framing[t] for t in judged}
        prereg = [np.sign(judged[t].prior_score - framing[t]) * moved[t] for t in judged]
        gold = [np.sign(judged[t].prior_score - judged[t].gold_score) * moved[t] for t in judged]
        assert _close(rows[key]["anchor vs framing (preregistered)"], np.mean(prereg))
        assert _close(rows[key]["anchor vs framing, gold-signed"], np.mean(gold))
    pulled = next(r for r in rows.values() if r["model"].startswith("simulated/pulled"))
    assert (
        float(pulled["anchor vs framing, gold-signed"])
        < -1
        < 0
        < float(pulled["anchor vs framing (preregistered)"])
    )
    console = Console(file=StringIO(), width=400)
    summary = analyze(run_dir).tables["judge_summary"]
    print_table(summary, console)
    out = console.file.getvalue()
    assert "anchor vs framing: prereg. / gold-signed" in out
    for r in summary.iter_rows(named=True):
        assert (
            f"{fmt(r['mean_anchor_vs_framing'])} / {fmt(r['mean_anchor_vs_framing_gold_signed'])}"
            in out
        )


def test_the_report_shows_the_dispersion_within_task(tmp_path):
    """The mean over tasks of each condition's SD across repetitions, as the report shows it,
    against the exported result JSON; single judgments have no SD, shown as a dash."""
    _, md, scores = _reported_run(tmp_path)
    rows = {r["model"].split(" [")[1].rstrip("]"): r for r in _md_rows(md, "Judge history")}
    for key, s in scores.items():
        cells = rows[key]["SD within task, blind / framing / anchor"].split(" / ")
        for cell, condition in zip(
            cells, ("blind", "history-framing", "history-anchor"), strict=True
        ):
            sds = [np.std(v, ddof=1) for (_, c), v in s.items() if c == condition]
            assert len(sds) == 8 and _close(cell, np.mean(sds))
    (tmp_path / "single").mkdir()
    outcome = _judge_run(tmp_path / "single", pull=0.5, reps=1)
    assert CliRunner().invoke(app, ["report", str(outcome.run_dir)]).exit_code == 0
    md = (outcome.run_dir / "report" / "report.md").read_text()
    assert {
        r["SD within task, blind / framing / anchor"] for r in _md_rows(md, "Judge history")
    } == {"– / – / –"}


MINUS_ZERO_OR_NOISE = re.compile(r"-0(?:\.0*)?(?![\d.])|e-\d")  # -0, -0.00, 2.78e-17


def test_outcomes_at_zero_print_as_0_not_minus_0_or_float_noise(tmp_path):
    """Eight tasks whose pulls, in thirds, sum to 0: a mean over them can come out as -2.78e-17
    (polars' and numpy's summation orders differ). A ninth task whose blind and anchored means
    differ by float noise alone. Both report tables print 0 there, never -0 or 1e-16."""
    ks = [0, -1, -4, -1, 6, 6, -1, -5]  # pull x 3 per task: anchor sums 9 + k over 3 judgments
    anchors = {9: [3, 3, 3], 8: [3, 3, 2], 5: [2, 2, 1], 15: [5, 5, 5], 4: [2, 1, 1]}
    slugs = [f"t{i}" for i in range(8)]
    rows = [
        (t, c, [3, 3, 3] if c < 2 else anchors[9 + k], ["fail"] * 3)
        for t, k in zip(slugs, ks, strict=True)
        for c in range(3)
    ]
    cond = _cond([(t, c, s, ["pass" if x >= 4 else "fail" for x in s]) for t, c, s, _ in rows])
    items = pl.DataFrame({"job": "j", "experimentSlug": slugs, "gold": 2, "prior": 5})
    noisy = _cond([("noise", c, [m], ["fail"]) for c, m in ((0, 1.1 + 2.2), (1, 3.3), (2, 3.3))])
    noisy_items = pl.DataFrame({"job": "j", "experimentSlug": ["noise"], "gold": 2, "prior": 5})
    for c, i, n in ((cond, items, 8), (noisy, noisy_items, 1)):
        tasks = task_outcomes(c, i).with_columns(model=pl.lit("m"))
        summary = model_summary(tasks, c, n_tasks=n).with_columns(model=pl.lit("m"))
        part = report(summary, tasks, tmp_path)
        for section in part.sections:
            for row in section.rows:
                assert not [v for v in row.values() if MINUS_ZERO_OR_NOISE.search(v)], row
    [s] = model_summary(task_outcomes(cond, items), cond, n_tasks=8).iter_rows(named=True)
    assert (
        s["mean_anchor_vs_framing"]
        == s["mean_anchor_vs_framing_gold_signed"]
        == s["mean_pull"]
        == 0.0
    )
    [t] = task_outcomes(noisy, noisy_items).iter_rows(named=True)
    assert (
        t["pull"]
        == t["pull_gold_signed"]
        == t["anchor_vs_framing"]
        == t["anchor_minus_framing"]
        == 0.0
    )
    assert not np.signbit(t["pull"])

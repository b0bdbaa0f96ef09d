"""The study registry: a new study is one folder plus one registry line, and the generic
pipeline (plan, run, analyze, report, export, the CLI) picks it up without naming it."""

from __future__ import annotations

import orjson
from typer.testing import CliRunner

import orchestrator.studies as studies
from orchestrator.cli import app
from tests.conftest import write_config
from tests.tiny_study import Tiny


def test_a_study_registered_in_one_line_runs_through_every_verb(tmp_path, monkeypatch):
    monkeypatch.setattr(studies, "STUDIES", (*studies.STUDIES, Tiny()))  # the one registry line
    (tmp_path / "tiny.json").write_bytes(
        orjson.dumps(
            {"tiny-study": 1, "question": "Is the sky blue?", "framings": ["Honestly:", "Quickly:"]}
        )
    )
    cfg = write_config(
        tmp_path,
        f"""
        name = "tiny"
        jobs = ["tiny.json"]
        samples = 3
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        [models.simulate.effects.tiny-question]
        conditions = [{{shares = {{yes = 1.0}}}}, {{shares = {{no = 1.0}}}}]
        """,
    )
    cli = CliRunner()
    plan = cli.invoke(app, ["plan", str(cfg)])
    assert plan.exit_code == 0 and "tiny-question" in plan.output, plan.output
    assert cli.invoke(app, ["run", str(cfg)]).exit_code == 0
    run_dir = tmp_path / "runs" / "tiny" / "default"
    analyzed = cli.invoke(app, ["analyze", str(run_dir)])
    assert analyzed.exit_code == 0 and "tiny study: 3 yes answers" in analyzed.output, (
        analyzed.output
    )
    counts = orjson.loads((run_dir / "tiny_summary.json").read_bytes())["counts"]
    assert [(c["conditionIndex"], c["answers"], c["yes"]) for c in counts] == [(0, 3, 3), (1, 3, 0)]
    assert cli.invoke(app, ["report", str(run_dir)]).exit_code == 0
    assert "## Tiny study" in (run_dir / "report" / "report.md").read_text()
    exported = cli.invoke(app, ["export", str(run_dir), "--format", "tiny-csv"])
    assert exported.exit_code == 0 and "6 records" in exported.output, exported.output
    assert len((run_dir / "export" / "tiny-csv" / "tiny.csv").read_text().splitlines()) == 7


def test_a_job_file_no_study_reads_names_every_known_format(tmp_path):
    (tmp_path / "odd.json").write_text('{"something": "else"}')
    cfg = write_config(
        tmp_path,
        """
        name = "odd"
        jobs = ["odd.json"]
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    result = CliRunner().invoke(app, ["plan", str(cfg)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "unrecognised job format" in flat
    for study in studies.STUDIES:
        assert study.format_hint in flat

"""One rule for a task's final record (issue 32, item 6): a results file with duplicate
terminal records, as two runs of one folder could write before the run lock, is counted once
by every reader, the first terminal record standing for its task."""

from __future__ import annotations

import orjson

from orchestrator.analysis.load import final_records, open_run
from orchestrator.engine.status import tally
from orchestrator.nightly.effects import run_effects
from orchestrator.viewer.server import open_target
from tests.conftest import run_quietly, write_config


def test_duplicates_count_once_for_status_analysis_and_the_viewer(tmp_path):
    config = write_config(
        tmp_path,
        f"""
        name = "d"
        jobs = ["paired"]
        samples = 3
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        temperature = 1.0
        """,
    )
    run_dir = run_quietly(config).run_dir
    path = run_dir / "results.ndjson"
    lines = path.read_bytes().splitlines()
    tasks = len(lines)
    doubled = []
    for line in lines[:10]:  # a second run's answers to the same tasks, written after
        record = orjson.loads(line)
        record["response"]["raw"] = "a duplicate"
        doubled.append(orjson.dumps(record))
    path.write_bytes(b"\n".join(lines + doubled) + b"\n")

    answered = final_records(open_run(run_dir)).collect()
    assert answered.height == tasks and answered["taskId"].n_unique() == tasks

    counts, _, _ = tally(path)
    assert sum(counts.values()) == tasks

    data, _ = open_target(run_dir)
    page = data.answers({"size": "500"})
    assert page["total"] == tasks
    assert all(r["raw"] != "a duplicate" for r in page["rows"])

    night = run_effects(run_dir)  # what compare and trend read
    assert int(night.models["records"].sum()) == tasks and night.pending == 0
    assert night.unfinished() is None


def test_instructed_answers_count_a_duplicate_once(tmp_path):
    from orchestrator.studies.instructed.answers import answers
    from tests.test_scoring import small_job

    config = write_config(
        tmp_path,
        f"""
        name = "i"
        jobs = ["{small_job(tmp_path)}"]
        samples = 2
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        temperature = 1.0
        """,
    )
    run_dir = run_quietly(config).run_dir
    before = answers(open_run(run_dir), "instructed").collect().height
    path = run_dir / "results.ndjson"
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join(lines + lines[:7]) + b"\n")  # seven tasks written twice
    assert answers(open_run(run_dir), "instructed").collect().height == before

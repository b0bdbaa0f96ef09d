"""Results where people already look (issue 33, items 4 and 5): `export --format parquet` read
back by polars, DuckDB, pandas and Hugging Face datasets; `export --format inspect` read back
by inspect_ai's own reader, one sample per task."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest

from tests.conftest import cli, run_quietly, write_config


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("interop")
    cfg = write_config(
        tmp,
        f"""
        name = "i"
        jobs = ["paired"]
        samples = 3
        output_dir = "{tmp / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        temperature = 1.0
        [models.simulate]
        parse_error_rate = 0.2
        [[models]]
        provider = "simulated"
        name = "other"
        temperature = 1.0
        """,
    )
    return run_quietly(cfg).run_dir


def _final(run_dir: Path) -> dict[str, dict]:
    """Each task's final record, read line by line (every task here has one)."""
    out: dict[str, dict] = {}
    for line in (run_dir / "results.ndjson").read_bytes().splitlines():
        rec = orjson.loads(line)
        out.setdefault(rec["taskId"], rec)
    return out


def test_parquet_has_one_row_per_final_record_with_prompt_and_answer(run_dir, tmp_path):
    done = cli("export", str(run_dir), "--format", "parquet", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "records.parquet"
    df = pl.read_parquet(path)
    final = _final(run_dir)
    assert df.height == len(final) and set(df["taskId"]) == set(final)
    for row in df.sample(20, seed=1).iter_rows(named=True):
        rec = final[row["taskId"]]
        assert row["answer"] == rec["response"]["raw"]  # the whole answer
        assert row["status"] == rec["status"] and row["sample"] == rec["sample"]
        assert row["experimentSlug"] == rec["experimentSlug"]
        assert row["value"] == rec["response"].get("value")
        assert row["prompt"] and row["messages"][-1]["content"] == row["prompt"]
    assert {"job", "variant", "strategy", "conditionIndex", "modelKey", "model"} <= set(df.columns)

    import duckdb
    import pandas as pd
    from datasets import load_dataset

    assert duckdb.sql(f"SELECT count(*) FROM '{path}'").fetchall()[0][0] == df.height
    assert len(pd.read_parquet(path)) == df.height
    dataset = load_dataset(
        "parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert dataset.num_rows == df.height and dataset[0]["taskId"] in final


def test_inspect_logs_open_in_inspects_reader_one_sample_per_task(run_dir, tmp_path):
    from inspect_ai.log import read_eval_log

    done = cli("export", str(run_dir), "--format", "inspect", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    logs = sorted(tmp_path.glob("*.eval"))
    final = _final(run_dir)
    jobs_models = {(r["job"], r["modelKey"]) for r in final.values()}
    assert len(logs) == len(jobs_models) == 2  # one per job x model identity
    seen: dict[str, object] = {}
    for path in logs:
        log = read_eval_log(str(path))
        assert log.status == "success" and log.eval.task == "paired"
        for sample in log.samples:
            rec = final[sample.id]
            seen[sample.id] = sample
            assert sample.metadata["experiment"] == rec["experimentSlug"]
            assert sample.metadata["condition"] == rec["conditionIndex"]
            assert sample.metadata["sample"] == rec["sample"]
            assert sample.output.completion == rec["response"]["raw"]
            assert sample.input[-1].text  # the rendered prompt
            parsed = rec["response"].get("choice", rec["response"].get("value"))
            if rec["status"] == "ok":
                assert sample.scores["parsed"].value == parsed
            else:
                assert not sample.scores
    assert set(seen) == set(final)  # one sample per task, none twice


def test_inspect_without_inspect_ai_says_how_to_get_it(run_dir, tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_inspect(name, *args, **kwargs):
        if name.startswith("inspect_ai"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_inspect)
    done = cli("export", str(run_dir), "--format", "inspect", "--out", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert "bias-orchestrator[inspect]" in done.stderr
    assert not list(tmp_path.glob("*.eval"))

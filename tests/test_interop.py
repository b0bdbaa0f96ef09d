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


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory) -> Path:
    """Two studies, one of them counterbalanced (a list in optionOrder)."""
    tmp = tmp_path_factory.mktemp("interop-mixed")
    cfg = write_config(
        tmp,
        f"""
        name = "m"
        jobs = ["paired", "bias-strength"]
        samples = 1
        output_dir = "{tmp / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        temperature = 1.0
        [models.simulate]
        parse_error_rate = 0.2
        """,
    )
    return run_quietly(cfg).run_dir


def _design(run_dir: Path) -> dict[tuple[str, str, int], tuple[str, str]]:
    """(job, experiment, condition) -> (condition label, bias slug), from the manifest's jobs."""
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    return {
        (job_id, e["slug"], c["index"]): (c["label"], e["bias_slug"])
        for job_id, job in manifest["jobs"].items()
        for e in job["experiments"]
        for c in e["conditions"]
    }


def _export(run_dir: Path, format: str, out: Path) -> None:
    done = cli("export", str(run_dir), "--format", format, "--out", str(out), cwd=out.parent)
    assert done.returncode == 0, done.stderr


def test_parquet_names_each_rows_condition_and_bias(mixed_run, tmp_path):
    """Condition label and bias slug, as the manifest's jobs name them: no join needed."""
    _export(mixed_run, "parquet", tmp_path)
    df = pl.read_parquet(tmp_path / "records.parquet")
    design = _design(mixed_run)
    assert set(df["job"]) == {"paired", "bias-strength"} and df.height == len(_final(mixed_run))
    for r in df.iter_rows(named=True):
        assert (r["conditionLabel"], r["biasSlug"]) == design[
            (r["job"], r["experimentSlug"], r["conditionIndex"])
        ]
    assert df["conditionLabel"].null_count() == df["biasSlug"].null_count() == 0
    assert {"Higher anchor", "control", "treatment"} <= set(df["conditionLabel"])


def test_csv_is_the_parquet_table_with_lists_flattened(mixed_run, tmp_path):
    _export(mixed_run, "parquet", tmp_path / "p")
    _export(mixed_run, "csv", tmp_path / "c")
    table = pl.read_parquet(tmp_path / "p" / "records.parquet")
    path = tmp_path / "c" / "records.csv"
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)  # written as every export is
    assert "records.csv" in (tmp_path / "c" / "export.toml").read_text()
    scalar = {c: t for c, t in table.schema.items() if not isinstance(t, pl.List | pl.Struct)}
    csv = pl.read_csv(path, schema_overrides=scalar)
    assert csv.columns == table.columns  # the same columns in the same order
    from polars.testing import assert_frame_equal

    assert_frame_equal(csv.select(list(scalar)), table.select(list(scalar)))
    assert {"conditionLabel", "biasSlug", "answer", "prompt"} <= set(scalar)
    orders = table["optionOrder"].to_list()
    assert any(orders) and csv["optionOrder"].to_list() == [
        "; ".join(o) if o is not None else None for o in orders
    ]
    assert [orjson.loads(m) for m in csv["messages"]] == table["messages"].to_list()

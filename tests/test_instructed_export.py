"""The Instructed to Bias answers export (`instructed-csv`, `instructed-parquet`): one row per
final result with its item, answer and scoring, which reproduces the analysis's counts and
t-tests (scipy on the rows' 0/1 answers); scoring-mode records (written by hand here: mode and
candidate scores) are exported per option position and counted once per item."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import polars as pl
import pytest
from scipy import stats
from typer.testing import CliRunner

from orchestrator.cli import app
from tests.conftest import ROOT, run_quietly, write_config
from tests.test_instructed_analysis import JOB, analyzed, simulated_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return simulated_run(tmp_path_factory.getbasetemp())


def export(run_dir: Path, name: str, out: Path) -> pl.DataFrame:
    result = CliRunner().invoke(app, ["export", str(run_dir), "--format", name, "--out", str(out)])
    assert result.exit_code == 0, result.output
    path = out / f"instructed-answers.{name.removeprefix('instructed-')}"
    assert f"records -> {path}" in " ".join(result.output.split())
    return (
        pl.read_csv(path, infer_schema_length=None)
        if path.suffix == ".csv"
        else pl.read_parquet(path)
    )


@pytest.fixture(scope="module")
def exported(run_dir, tmp_path_factory) -> pl.DataFrame:
    return export(run_dir, "instructed-parquet", tmp_path_factory.mktemp("export"))


def records(run_dir: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


def test_one_row_per_final_result_with_its_item_and_answer(run_dir, exported):
    recs = {r["taskId"]: r for r in records(run_dir)}
    assert (
        exported.height == len(recs) == 2 * 7800
        and exported["taskId"].n_unique() == exported.height
    )
    items = {
        (e.slug, c.index, v.id): v
        for e in JOB.experiments
        for c in e.conditions
        for v in c.variants
    }
    for row in exported.sample(400, seed=1).iter_rows(named=True):
        rec = recs[row["taskId"]]
        assert (row["status"], row["choice"], row["role"]) == (
            rec["status"],
            rec["response"].get("choice"),
            rec["response"].get("role"),
        )
        assert (row["modelKey"], row["experimentSlug"], row["variant"]) == (
            rec["modelKey"],
            rec["experimentSlug"],
            rec["variant"],
        )
        v = items[(row["experimentSlug"], row["conditionIndex"], row["variant"])]
        assert row["template"] == v.item["template"] and row["option_order"] == v.item["order"]
        assert row["options"] == "; ".join(v.contract.options) and row["roles"] == "; ".join(
            v.contract.roles
        )
        assert all(
            row[f"item_{k}"] == x
            for k, x in v.item.items()
            if k not in ("template", "order", "shown")
        )
        assert row["condition"] == ("control", "treatment")[row["conditionIndex"]]
        assert row["mode"] == "generate" and row["logp_1"] is None and row["pmi_3"] is None
    assert exported["model"].unique(maintain_order=True).to_list() == [
        "simulated/base",
        "simulated/tuned",
    ]
    assert set(exported["status"]) == {"ok", "parse_error", "refused"}


def test_csv_and_parquet_hold_the_same_rows(run_dir, exported, tmp_path):
    csv = export(run_dir, "instructed-csv", tmp_path)
    assert csv.columns == exported.columns and csv.height == exported.height
    for column in (
        "taskId",
        "variant",
        "choice",
        "target",
        "chose_target",
        "item_target_price",
        "bias_scores",
    ):
        assert csv[column].to_list() == exported[column].to_list(), column


def indicators(rows: pl.DataFrame, score: str, condition: int) -> list[float]:
    """The 0/1 'chose the target' answers a score counts, from the export's rows alone."""
    part = rows.filter(
        (pl.col("conditionIndex") == condition)
        & (pl.col("status") == "ok")
        & pl.col("bias_scores").str.split("; ").list.contains(score)
    )
    if "; " in (
        part["target"][0] if part.height else ""
    ):  # the decoy control: the score names the target
        target = "cheaper" if score == "Decoy Cheaper" else "expensive"
        return (part["role"] == target).cast(float).to_list()
    return part["chose_target"].cast(float).to_list()


def test_the_exported_answers_reproduce_the_analysis_and_its_t_test(run_dir, exported):
    scores = analyzed(run_dir)["scores"]
    for r in scores:
        rows = exported.filter(pl.col("modelKey") == r["modelKey"])
        treatment, control = indicators(rows, r["score"], 1), indicators(rows, r["score"], 0)
        assert (len(treatment), sum(treatment), len(control), sum(control)) == (
            r["n_treatment"],
            r["hits_treatment"],
            r["n_control"],
            r["hits_control"],
        )
        if r["score"].startswith("Decoy"):  # Equation 1 on a decoy is not tested
            assert (r["t"], r["p_t"], r["p_fisher"]) == (None, None, None)
            continue
        ref = stats.ttest_ind(treatment, control, equal_var=True)
        assert (r["t"], r["p_t"], r["t_df"]) == (
            pytest.approx(ref.statistic, rel=1e-9),
            pytest.approx(ref.pvalue, rel=1e-8),
            ref.df,
        )


def scored(rec: dict, options: tuple[str, ...], roles: tuple[str, ...]) -> dict:
    """A scoring-mode response by hand: the candidates in reverse option order, the choice the
    argmax of pmi = logp - premise (here the last option shown)."""
    cands = [
        {"option": o, "role": r, "logp": -2.0 - k, "premise": -1.0 - 2 * k, "pmi": -1.0 + k}
        for k, (o, r) in enumerate(zip(options, roles, strict=True))
    ][::-1]
    best = max(cands, key=lambda c: c["pmi"])
    return {
        **rec,
        "response": {
            "choice": best["option"],
            "role": best["role"],
            "mode": "score",
            "scores": cands,
        },
    }


@pytest.mark.slow
def test_scored_answers_are_exported_per_option_position_and_count_once(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(
        run_dir, copy, ignore=shutil.ignore_patterns("report", "export", "instructed_*")
    )
    variants = {
        (e.slug, c.index, v.id): v
        for e in JOB.experiments
        for c in e.conditions
        for v in c.variants
    }
    lines, extra = [], []
    for rec in records(run_dir):
        if (
            rec["model"]["name"] == "base"
            and rec["experimentSlug"] == "certainty"
            and rec["status"] == "ok"
        ):
            v = variants[(rec["experimentSlug"], rec["conditionIndex"], rec["variant"])]
            rec = scored(rec, v.contract.options, v.contract.roles)
            if (
                len(extra) < 50
            ):  # a second sample of a scored item: the same draw, not counted again
                extra.append(
                    {
                        **rec,
                        "taskId": rec["taskId"][::-1],
                        "sample": 2,
                        "response": {"choice": v.contract.options[0], "role": v.contract.roles[0]}
                        | {"mode": "score", "scores": rec["response"]["scores"]},
                    }
                )
        lines.append(rec)
    (copy / "results.ndjson").write_bytes(
        b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in lines + extra)
    )
    before = {(r["model"], r["score"]): r for r in analyzed(run_dir)["scores"]}
    after = {(r["model"], r["score"]): r for r in analyzed(copy)["scores"]}
    certainty = after[("simulated/base", "Certainty")]
    assert (
        certainty["mode"] == "generate+score"
        and after[("simulated/base", "Decoy Cheaper")]["mode"] == "generate"
    )
    was = before[("simulated/base", "Certainty")]
    assert (certainty["n_treatment"], certainty["n_control"]) == (
        was["n_treatment"],
        was["n_control"],
    )
    shown_last = sum(
        1
        for r in lines
        if r["response"].get("mode") == "score"
        and r["conditionIndex"] == 1
        and r["response"]["choice"] == "Option B"
        and r["response"]["role"] == "safe"
    )
    assert certainty["hits_treatment"] == shown_last  # the argmax-pmi choices, each counted once

    table = export(copy, "instructed-parquet", tmp_path / "out")
    assert table.height == len(lines) + len(extra)
    rows = table.filter(pl.col("mode") == "score")
    assert rows.height == sum(1 for r in lines + extra if r["response"].get("mode") == "score")
    assert set(table.filter(pl.col("experimentSlug") != "certainty")["mode"]) == {"generate"}
    for row in rows.head(20).iter_rows(
        named=True
    ):  # position k: the k-th option shown, whatever the list order
        assert [row[f"logp_{k}"] for k in (1, 2)] == [-2.0, -3.0] and row["logp_3"] is None
        assert [row[f"premise_{k}"] for k in (1, 2)] == [-1.0, -3.0]
        assert [row[f"pmi_{k}"] for k in (1, 2)] == [-1.0, 0.0]


def test_a_damaged_results_file_is_refused_before_anything_is_written(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(
        run_dir, copy, ignore=shutil.ignore_patterns("report", "export", "instructed_*")
    )
    data = (copy / "results.ndjson").read_bytes().splitlines(keepends=True)
    (copy / "results.ndjson").write_bytes(b"".join(data[:5] + [b"{not json\n"] + data[5:]))
    result = CliRunner().invoke(
        app, ["export", str(copy), "--format", "instructed-csv", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert not (tmp_path / "o").exists()


def test_a_run_with_no_instructed_job_names_the_formats_it_has(tmp_path):
    cfg = write_config(
        tmp_path,
        f"""
        name = "paired"
        jobs = ["{ROOT / "tests" / "data" / "three-biases.json"}"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    run_quietly(cfg)
    run = next((tmp_path / "runs" / "paired").iterdir())
    result = CliRunner().invoke(
        app, ["export", str(run), "--format", "instructed-parquet", "--out", str(tmp_path / "o")]
    )
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "the bias-strength study" in said, said  # not exit 0
    assert "fix: use one of: parquet" in said, said  # bias-strength has no format of its own
    assert not (tmp_path / "o").exists()

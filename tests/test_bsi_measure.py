"""What the 11-bias study's numbers mean: the decoy's attraction measure, models told apart by
identity, debiasing reductions with uncertainty, sigma_sys for K < 2, and the report's figures
read back from what they drew."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import orjson
import polars as pl

from orchestrator.analysis.summary import analyze
from tests.conftest import ROOT, run_quietly, write_config

STRATEGIES = ("baseline", "cot", "warning", "analyst")


def _job_of(tmp_path, slugs: tuple[str, ...], name: str = "job.json"):
    """The built-in eleven-biases job cut down to some of its biases (same format, same prompts)."""
    job = json.loads((ROOT / "jobs" / "eleven-biases.json").read_text())
    job["biases"] = [b for b in job["biases"] if b["slug"] in slugs]
    path = tmp_path / name
    path.write_text(json.dumps(job))
    return path


def _records(run_dir):
    return [orjson.loads(line) for line in (run_dir / "results.ndjson").read_bytes().splitlines()]


def test_a_respondent_with_no_bias_and_a_first_position_habit_shows_no_decoy_effect(tmp_path):
    """The control shows target and competitor, the treatment adds the decoy. Picking at random
    (or whatever is listed first, orders counterbalanced) gives the target 1/2 of the answers in
    the control and 1/3 in the treatment: the option count alone, not an attraction effect."""
    cfg = write_config(tmp_path, f"""
        name = "null-decoy"
        jobs = ["{_job_of(tmp_path, ('decoy',))}"]
        samples = 60
        output_dir = "{tmp_path / 'runs'}"
        [[models]]
        provider = "simulated"
        name = "first-picker"
        [models.simulate]
        first_position_bias = 0.8
        """)
    outcome = run_quietly(cfg)
    tables = analyze(outcome.run_dir).tables
    summary = tables["bsi_summary"]
    assert sorted(summary["strategy"]) == sorted(STRATEGIES)
    for r in summary.iter_rows(named=True):
        called = [name for name in ("significant_variant", "significant_mixed") if r[name]]
        assert not called, f"{r['strategy']}: a respondent with no decoy effect called biased ({called})"
        assert abs(r["bsi_signed"]) < 0.15, r  # option count alone gave -0.17
        assert 0.25 < r["extra_share_T"] < 0.42  # the decoy drew its 1/3, counted apart
    # The measure's counts, recounted from the results file: the target among target-or-competitor
    # answers, decoy answers apart.
    ok = [r for r in _records(outcome.run_dir) if r["status"] == "ok"]
    roles = Counter((r["strategy"], r["variant"], r["conditionIndex"], r["response"]["role"]) for r in ok)
    first = np.mean([r["response"]["role"] == r["optionOrder"][0] for r in ok])
    assert first > 0.8  # the habit is there (0.8 + 0.2 x chance): what counterbalancing must cancel
    variants = tables["bsi_variants"]
    for v in variants.iter_rows(named=True):
        got = {c: roles[(v["strategy"], v["variant"], i, "target")] for i, c in enumerate("CT")}
        shown = {c: got[c] + roles[(v["strategy"], v["variant"], i, "competitor")] for i, c in enumerate("CT")}
        assert (v["k_C"], v["n_C"], v["k_T"], v["n_T"]) == (got["C"], shown["C"], got["T"], shown["T"])
        assert v["n_extra_C"] == 0 and v["n_extra_T"] == roles[(v["strategy"], v["variant"], 1, "decoy")]
        assert v["bsi_signed"] == got["T"] / shown["T"] - got["C"] / shown["C"]

"""docs/your-own-experiment.md as a new user follows it (issue 43): each example is what
`init --experiment KIND` writes, and runs as written on the simulated respondent and on the
emulator, every answer kept (a free-text reply through the extractor)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest

from orchestrator.starter_experiments import EXPERIMENTS
from tests.conftest import ROOT, cli, write_config

GUIDE = ROOT / "docs" / "your-own-experiment.md"


def _examples() -> dict[str, dict]:
    text = GUIDE.read_text(encoding="utf-8")
    found = re.findall(r"<!-- example: ([\w-]+) -->\n```json\n(.*?)\n```", text, re.S)
    return {kind: json.loads(body) for kind, body in found}


def test_the_guide_shows_each_kind_as_init_writes_it():
    assert _examples() == EXPERIMENTS


def _records(run: Path) -> list[dict]:
    return [orjson.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]


@pytest.mark.parametrize("kind", list(EXPERIMENTS))
def test_each_example_runs_as_written_on_the_simulated_respondent(tmp_path, kind):
    done = cli("init", str(tmp_path / "study"), "--experiment", kind, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    study = tmp_path / "study"
    assert json.loads((study / f"{kind}-experiment.json").read_text()) == _examples()[kind]
    planned = cli("plan", "campaign.toml", cwd=study)
    assert planned.returncode == 0 and "answer" in planned.stdout, planned.stderr
    assert cli("run", "campaign.toml", cwd=study).returncode == 0
    run = study / "runs" / f"my-{kind}" / "default"
    assert {r["status"] for r in _records(run)} == {"ok"} and len(_records(run)) == 60
    analyzed = cli("analyze", str(run), "--json", cwd=study)
    assert analyzed.returncode == 0
    effects = json.loads(analyzed.stdout)["tables"]["summary"]
    assert [e["experimentSlug"] for e in effects] == [
        EXPERIMENTS[kind]["experiments"][0]["experimentSlug"]
    ]


@pytest.mark.parametrize("kind", list(EXPERIMENTS))
def test_each_example_runs_as_written_on_the_emulator(tmp_path, kind, emulator):
    url = emulator().base_url("openai")
    job = tmp_path / f"{kind}-experiment.json"
    job.write_text(json.dumps(_examples()[kind]))
    extractor = (
        f"""
        [extractor]
        provider = "openai"
        name = "emulated-extractor"
        base_url = "{url}"
        limit = "extractor"
        """
        if kind == "free-text"
        else ""
    )
    cfg = write_config(
        tmp_path,
        f"""
        name = "mine"
        jobs = ["{job}"]
        samples = 10
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "openai"
        name = "emulated"
        base_url = "{url}"
        temperature = 0.7
        {extractor}
        """,
    )
    done = cli("run", str(cfg), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records = _records(tmp_path / "runs" / "mine" / "default")
    assert {r["status"] for r in records} == {"ok"} and len(records) == 20
    if kind == "free-text":  # replies in words, each read by the extractor
        assert all(r.get("extractedBy") for r in records)
        assert all("weeks" in r["response"]["raw"] for r in records)

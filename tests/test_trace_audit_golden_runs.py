"""The golden set audited by the simulated judge: `calibrate` recovers the planted agreement,
`audit-gate` passes the same judge re-audited under another seed (not a run against itself,
which cannot fail) and fails on a planted regression (anchoring no longer caught), its flipped
traces can be audited again alone, a tolerance is learned from re-audits of the baseline
(`--baseline-again`), and `review` stores a person's determinations from the
terminal, resumably."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.conftest import ROOT, cli


def audit_run(tmp_path: Path, config: str, configs: Path = ROOT / "configs") -> Path:
    """A shipped audit config (or one in `configs`), run with its runs under tmp_path."""
    text = (
        (configs / config)
        .read_text()
        .replace(
            'jobs = ["trace-audit-golden"]',
            f'jobs = ["trace-audit-golden"]\noutput_dir = "{tmp_path / "runs"}"',
        )
    )
    (tmp_path / config).write_text(text)
    done = cli("run", str(tmp_path / config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path / "runs" / config.removesuffix(".toml") / "default"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("golden")
    return {
        name: audit_run(tmp, f"{name}.toml")
        for name in (
            "trace-audit-golden-simulated",
            "trace-audit-golden-reaudit",
            "trace-audit-golden-regressed",
        )
    }


def test_calibrate_finds_the_planted_agreement_and_writes_its_tables(runs):
    run = runs["trace-audit-golden-simulated"]
    done = cli("calibrate", str(run), cwd=run)
    assert done.returncode == 0, done.stderr
    import polars as pl

    table = pl.read_csv(run / "calibration" / "agreement.csv")
    assert set(table["bias"]) == {"Anchoring", "Confirmation", "Availability", "Representativeness"}
    # reference kept with p = 0.8, else one point off: quadratic-weighted kappa stays high
    assert table["kappa_w"].min() > 0.7
    assert (run / "calibration" / "thresholds.csv").is_file()
    matrices = orjson.loads((run / "calibration" / "confusion.json").read_bytes())
    total = sum(
        v for row in matrices["Anchoring"]["scores"] for k, v in row.items() if k != "judge"
    )
    assert total == 64


def test_the_gate_passes_a_reaudit_and_fails_on_a_planted_regression(runs):
    base = runs["trace-audit-golden-simulated"]
    again = cli(
        "audit-gate", str(runs["trace-audit-golden-reaudit"]), "--baseline", str(base), cwd=base
    )
    assert again.returncode == 0, again.stdout + again.stderr
    verdict = orjson.loads((runs["trace-audit-golden-reaudit"] / "gate.json").read_bytes())
    # independent noise flips some catches (the previous gate failed on any one of them)
    assert verdict["ok"] and verdict["flipped"] and verdict["alpha"] == 0.05
    worse = cli(
        "audit-gate", str(runs["trace-audit-golden-regressed"]), "--baseline", str(base), cwd=base
    )
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "Anchoring" in worse.stdout and "FAIL" in worse.stdout
    gate = orjson.loads((runs["trace-audit-golden-regressed"] / "gate.json").read_bytes())
    assert {m["bias"] for m in gate["missed"]} == {"Anchoring"} and len(gate["missed"]) >= 10
    assert [c["bias"] for c in gate["catches"] if c["failed"]] == ["Anchoring"]
    anchoring = next(c for c in gate["catches"] if c["bias"] == "Anchoring")
    assert anchoring["caughtNow"] == 0 and anchoring["floor"]


def test_the_flipped_traces_are_written_and_audited_again_alone(runs, tmp_path):
    base = runs["trace-audit-golden-simulated"]
    flipped = tmp_path / "flipped.txt"
    done = cli(
        "audit-gate",
        str(runs["trace-audit-golden-regressed"]),
        "--baseline",
        str(base),
        "--flipped-out",
        str(flipped),
        cwd=tmp_path,
    )
    assert done.returncode == 1
    gate = orjson.loads((runs["trace-audit-golden-regressed"] / "gate.json").read_bytes())
    ids = flipped.read_text().split()
    assert ids == gate["flippedTraces"] == sorted({f["traceId"] for f in gate["flipped"]})
    done = cli(
        "audit",
        str(ROOT / "jobs" / "trace-audit-golden.jsonl"),
        "--judge",
        "simulated",
        "--only",
        str(flipped),
        "--output-dir",
        "out",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (rerun,) = [d / "default" for d in (tmp_path / "out").iterdir()]
    assert rerun.parent.name.startswith("trace-audit-golden-flipped-")
    lines = [orjson.loads(x) for x in (rerun / "results.ndjson").read_bytes().splitlines()]
    assert sorted(r["variant"] for r in lines) == ids
    # the re-audit of the flipped traces against the baseline, on those traces alone (old
    # code: no --only, and "48 golden trace(s) of the baseline are not in this run")
    again = cli(
        "audit-gate", str(rerun), "--baseline", str(base), "--only", str(flipped), cwd=tmp_path
    )
    assert "not in this run" not in again.stdout, again.stdout
    assert again.returncode == 0, again.stdout + again.stderr  # the unchanged judge catches them
    verdict = orjson.loads((rerun / "gate.json").read_bytes())
    assert verdict["ok"] and verdict["onlyBaseline"] == []
    assert sum(c["refFlagged"] for c in verdict["catches"]) <= len(ids) * 4
    still = cli(
        "audit-gate",
        str(runs["trace-audit-golden-regressed"]),
        "--baseline",
        str(base),
        "--only",
        str(flipped),
        cwd=tmp_path,
    )
    assert still.returncode == 1 and "Anchoring" in still.stdout  # flipped again on re-audit
    # another list of ids is another campaign, not a changed plan (old code: exit 2)
    (tmp_path / "d").mkdir()  # the same file name, other ids
    (tmp_path / "d" / "flipped.txt").write_text("".join(f"{t}\n" for t in ids[:2]))
    done = cli(
        "audit",
        str(ROOT / "jobs" / "trace-audit-golden.jsonl"),
        "--judge",
        "simulated",
        "--only",
        str(tmp_path / "d" / "flipped.txt"),
        "--output-dir",
        "out",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "out").iterdir())) == 2
    (tmp_path / "typo.txt").write_text("g001\nnot-a-trace\n")
    bad = cli(
        "audit",
        str(ROOT / "jobs" / "trace-audit-golden.jsonl"),
        "--only",
        "typo.txt",
        "--output-dir",
        "out",
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "not-a-trace" in bad.stderr and "typo.txt" in bad.stderr


def test_calibrate_refuses_an_audit_without_reference_labels(tmp_path):
    (tmp_path / "t.jsonl").write_text(
        orjson.dumps(
            {
                "trace_id": "a",
                "reasoning_trace": "Step 1: x.\nStep 2: y.\nStep 3: z.",
                "task_context": "A task.",
                "evidence": ["a fact"],
                "expected_bias_profile": "",
            }
        ).decode()
        + "\n"
    )
    assert (
        cli(
            "audit", "t.jsonl", "--judge", "simulated", "--output-dir", "out", cwd=tmp_path
        ).returncode
        == 0
    )
    done = cli("calibrate", "out/t/default", cwd=tmp_path)
    assert done.returncode == 2 and "reference labels" in done.stderr
    assert not (tmp_path / "out" / "t" / "default" / "calibration").exists()


def test_review_in_the_terminal_stores_determinations_and_resumes(runs):
    run = runs["trace-audit-golden-regressed"]
    lines = [orjson.loads(x) for x in (run / "results.ndjson").read_bytes().splitlines()]
    flagged = sum(r["response"]["disposition"] in ("flagged", "escalated") for r in lines)
    one = "b2\nn\nn4\nu\nlooks anchored\n"
    first = cli("review", str(run), "--reviewer", "ann", cwd=run, stdin=one + "q\n")
    assert first.returncode == 0, first.stderr
    stored = [orjson.loads(x) for x in (run / "reviews.ndjson").read_bytes().splitlines()]
    assert (
        len(stored) == 1
        and stored[0]["reviewer"] == "ann"
        and stored[0]["note"] == "looks anchored"
    )
    assert stored[0]["determinations"]["Anchoring"] == {"biased": True, "score": 2}
    judge = {
        a["bias_type"]: a["score"]
        for a in next(r for r in lines if r["taskId"] == stored[0]["taskId"])["response"]["audit"][
            "bias_audits"
        ]
    }
    agrees = {
        b: int((judge[b] <= 2) == said)
        for b, said in (("Anchoring", True), ("Confirmation", False), ("Availability", False))
    }
    assert (
        f"Anchoring {agrees['Anchoring']} of 1, Confirmation {agrees['Confirmation']} of 1, "
        f"Availability {agrees['Availability']} of 1"
    ) in " ".join(first.stdout.split())
    second = cli("review", str(run), "--reviewer", "ann", cwd=run, stdin=one + "q\n")
    assert f"1 of {flagged} reviewed" in second.stdout
    assert len((run / "reviews.ndjson").read_bytes().splitlines()) == 2


def test_the_gate_fails_a_run_that_lacks_baseline_traces(runs, tmp_path):
    import shutil

    partial = tmp_path / "partial"
    shutil.copytree(runs["trace-audit-golden-simulated"], partial)
    lines = (partial / "results.ndjson").read_bytes().splitlines(keepends=True)
    (partial / "results.ndjson").write_bytes(b"".join(lines[:-3]))  # an unfinished run
    done = cli(
        "audit-gate",
        str(partial),
        "--baseline",
        str(runs["trace-audit-golden-simulated"]),
        cwd=tmp_path,
    )
    assert (
        done.returncode == 1
        and "3 golden trace(s) of the baseline are not in this run" in done.stdout
    )


def test_the_gate_learns_a_tolerance_from_reaudits_of_the_baseline(runs, tmp_path):
    """`--baseline-again` twice: the re-audit passes, the regression fails, and gate.json holds
    the learned tolerances; once is refused (its tolerance would pass any regression)."""
    text = (ROOT / "configs" / "trace-audit-golden-reaudit.toml").read_text()
    again = []
    for seed in (2, 3):  # the shipped re-audit, under other seeds and names
        name = f"trace-audit-golden-reaudit{seed}"
        config = text.replace("seed = 1", f"seed = {seed}").replace(
            'name = "trace-audit-golden-reaudit"', f'name = "{name}"'
        )
        (tmp_path / "configs").mkdir(exist_ok=True)
        (tmp_path / "configs" / f"{name}.toml").write_text(config)
        again.append(audit_run(tmp_path, f"{name}.toml", configs=tmp_path / "configs"))
    base = runs["trace-audit-golden-simulated"]
    flags = [x for run in again for x in ("--baseline-again", str(run))]
    passed = cli(
        "audit-gate",
        str(runs["trace-audit-golden-reaudit"]),
        "--baseline",
        str(base),
        *flags,
        cwd=tmp_path,
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "tolerances learned from 3 runs of the baseline" in passed.stdout
    failed = cli(
        "audit-gate",
        str(runs["trace-audit-golden-regressed"]),
        "--baseline",
        str(base),
        *flags,
        cwd=tmp_path,
    )
    assert failed.returncode == 1 and "Anchoring" in failed.stdout, failed.stdout
    verdict = orjson.loads((runs["trace-audit-golden-regressed"] / "gate.json").read_bytes())
    assert [r["runs"] for r in verdict["learned"]] == [3] * 4
    once = cli(
        "audit-gate",
        str(runs["trace-audit-golden-reaudit"]),
        "--baseline",
        str(base),
        *flags[:2],
        cwd=tmp_path,
    )
    assert once.returncode == 2 and "--baseline-again" in once.stdout + once.stderr

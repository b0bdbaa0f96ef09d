"""What a person reads when something is off on the way to their own experiment (issue 43,
item 6): a model named by its label, an export of a format the run holds nothing of, a job that
is a run yet to be made, a campaign folder given for a run folder, a misspelled model name."""

from __future__ import annotations

import pytest
from aiohttp import web

from tests.conftest import cli, run_quietly, write_config
from tests.test_untrusted_servers import Loopback


def _said(done) -> str:
    return " ".join((done.stdout + done.stderr).split())


def _simulated(tmp_path, *, job: str = "paired", run_id: str = "default", name: str = "c"):
    return write_config(
        tmp_path,
        f"""
        name = "{name}"
        jobs = ["{job}"]
        samples = 1
        run_id = "{run_id}"
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
        name=f"{name}-{run_id}.toml",
    )


# a. A model that stops is named as the config names it, not by its identity hash.


def test_a_stopped_model_is_named_by_its_label(tmp_path, monkeypatch):
    monkeypatch.setenv("KEY_FOR_TEST", "k" * 20)

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "invalid api key"}}, status=401)

    server = Loopback(refuse)
    try:
        cfg = write_config(
            tmp_path,
            f"""
            name = "u"
            jobs = ["paired"]
            samples = 1
            output_dir = "{tmp_path / "runs"}"
            [[models]]
            provider = "openai"
            name = "my-model"
            base_url = "{server.url}/v1"
            api_key_env = "KEY_FOR_TEST"
            [limits.openai]
            max_attempts = 1
            """,
        )
        done = cli("run", str(cfg), cwd=tmp_path)
    finally:
        server.stop()
    said = _said(done)
    assert done.returncode == 1, said
    assert "model openai/my-model" in said and "stopped on a fatal error" in said, said
    from orchestrator.session import load_campaign

    key = load_campaign(cfg).config.models[0].key
    assert f"model {key} stopped" not in said  # the key may follow in brackets, not lead


def test_a_reviewed_trace_names_its_judge_by_label_unless_blind():
    from io import StringIO

    from rich.console import Console

    from orchestrator.studies.trace_audit.review import _show

    record = {
        "modelKey": "0a1b2c3d4e5f",
        "model": {"provider": "openai", "name": "judge-model", "version": "v"},
        "response": {"traceId": "t1", "disposition": "flagged", "trace": "step one"},
    }
    for blind in (False, True):
        out = StringIO()
        _show(Console(file=out, width=200), record, 1, 1, blind=blind)
        said = out.getvalue()
        assert ("openai/judge-model [0a1b2c3d4e5f]" in said) is not blind, said
        assert "0a1b2c3d4e5f" in said


# b. An export format of another study: which study the run holds, and the formats that fit.


def test_an_export_of_another_studys_format_names_the_formats_that_fit(tmp_path):
    run_dir = run_quietly(_simulated(tmp_path)).run_dir
    done = cli("export", str(run_dir), "--format", "judge-history", cwd=tmp_path)
    said = _said(done)
    assert done.returncode == 2, said
    assert "option '--format'" in said and "paired" in said and "judge-history" in said, said
    fix = said.split("fix:")[1]
    assert "ai-benchmark" in fix and "parquet" in fix and "judge-history" not in fix, said
    assert "nothing to export" not in said
    assert not (run_dir / "export" / "judge-history").exists()
    # the format named in the fix works
    done = cli("export", str(run_dir), "--format", "ai-benchmark", cwd=tmp_path)
    assert done.returncode == 0 and "records ->" in done.stdout, _said(done)


def test_an_export_of_a_run_with_no_results_yet_has_nothing_to_export(tmp_path):
    run_dir = run_quietly(_simulated(tmp_path)).run_dir
    (run_dir / "results.ndjson").write_bytes(b"")
    done = cli("export", str(run_dir), "--format", "judge-history", cwd=tmp_path)
    assert done.returncode == 0, _said(done)
    assert "nothing to export" in done.stdout and "no results yet" in _said(done), _said(done)


# c. A job that is a run folder not made yet: which run makes it.


def test_a_job_naming_a_run_yet_to_be_made_says_which_config_to_run_first(tmp_path):
    (tmp_path / "configs").mkdir()
    write_config(
        tmp_path / "configs",
        """
        name = "producer"
        jobs = ["bias-strength"]
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
        name="producer.toml",
    )
    audit = write_config(
        tmp_path / "configs",
        """
        name = "audit"
        jobs = ["runs/producer/default"]
        [[models]]
        provider = "simulated"
        name = "judge"
        """,
        name="audit.toml",
    )
    for verb in ("plan", "run"):
        done = cli(verb, str(audit), cwd=tmp_path)
        said = _said(done)
        assert done.returncode == 2, said
        assert "neither a file nor a built-in job" not in said, said
        assert "field 'jobs[0]'" in said and "does not exist yet" in said, said
        assert "orchestrator run configs/producer.toml" in said and "first" in said, said
        assert not (tmp_path / "runs" / "audit").exists()


def test_a_job_naming_another_run_id_of_a_config_says_with_which_run_id(tmp_path):
    write_config(
        tmp_path,
        f"""
        name = "producer"
        jobs = ["bias-strength"]
        output_dir = "{tmp_path / "out"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
        name="producer.toml",
    )
    audit = write_config(
        tmp_path,
        f"""
        name = "audit"
        jobs = ["{tmp_path / "out" / "producer" / "night-1"}"]
        output_dir = "{tmp_path / "out"}"
        [[models]]
        provider = "simulated"
        name = "judge"
        """,
        name="audit.toml",
    )
    done = cli("plan", str(audit), cwd=tmp_path)
    said = _said(done)
    assert done.returncode == 2, said
    assert "orchestrator run producer.toml --run-id night-1" in said, said


def test_a_job_naming_a_run_folder_no_config_makes_says_a_run_must_make_it(tmp_path):
    audit = write_config(
        tmp_path,
        f"""
        name = "audit"
        jobs = ["runs/elsewhere/default"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "judge"
        """,
    )
    done = cli("plan", str(audit), cwd=tmp_path)
    said = _said(done)
    assert done.returncode == 2, said
    assert "run folder" in said and "does not exist yet" in said, said
    assert "campaign 'elsewhere'" in said and "first" in said, said


def test_a_job_file_that_is_missing_is_still_neither_a_file_nor_a_built_in_job(tmp_path):
    cfg = write_config(
        tmp_path,
        """
        name = "t"
        jobs = ["jobs/mine.json"]
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    done = cli("plan", str(cfg), cwd=tmp_path)
    assert done.returncode == 2 and "neither a file nor a built-in job" in _said(done)


# d. A campaign folder where a run folder is wanted: its runs, and the command for one.


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("campaign")
    for run_id in ("n1", "n2"):
        run_quietly(_simulated(tmp_path, run_id=run_id))
    return tmp_path / "runs" / "c"


@pytest.mark.parametrize("verb", ["analyze", "status", "report", "export", "repair"])
def test_a_campaign_folder_given_for_a_run_folder_lists_its_runs(campaign_dir, verb):
    done = cli(verb, str(campaign_dir), cwd=campaign_dir.parent)
    said = _said(done)
    assert done.returncode == 2, said
    assert "campaign folder" in said and "its runs: n1, n2" in said, said
    assert f"orchestrator {verb} {campaign_dir / 'n2'}" in said, said
    assert "Traceback" not in said
    assert not (campaign_dir / "report").exists() and not (campaign_dir / "export").exists()


def test_an_empty_folder_is_still_not_a_run_folder(tmp_path):
    done = cli("analyze", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "no manifest.json" in _said(done), _said(done)


# e. A model name with no price that is close to one with a price.


def test_a_misspelled_model_is_told_the_close_priced_names(tmp_path, monkeypatch):
    cfg = write_config(
        tmp_path,
        f"""
        name = "t"
        jobs = ["paired"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "openai"
        name = "gpt-4o-mni"
        base_url = "http://127.0.0.1:9/v1"
        """,
    )
    for args in (("plan", str(cfg)), ("plan", "--json", str(cfg))):
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 0, _said(done)
        said = " ".join(done.stderr.split())
        assert "openai/gpt-4o-mni has no price" in said and "did you mean" in said, said
        assert "'gpt-4o-mini'" in said, said
    monkeypatch.setenv("OPENAI_API_KEY", "k" * 20)
    done = cli("run", str(cfg), "--budget", "1", cwd=tmp_path)
    said = _said(done)
    assert done.returncode == 2 and "has no price" in said and "'gpt-4o-mini'" in said, said
    assert not (tmp_path / "runs").exists()


def test_a_model_with_no_close_priced_name_gets_no_suggestion(tmp_path):
    cfg = write_config(
        tmp_path,
        """
        name = "t"
        jobs = ["paired"]
        samples = 1
        [[models]]
        provider = "openai"
        name = "my-own-finetune-xyz"
        base_url = "http://127.0.0.1:9/v1"
        """,
    )
    done = cli("plan", str(cfg), cwd=tmp_path)
    assert done.returncode == 0 and "did you mean" not in _said(done), _said(done)

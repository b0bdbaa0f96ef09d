"""Bad input a careful user's security team would try (issue 31): a key with a control character
(a CRLF env file), run names that are paths, and the modes of what a run writes."""

from __future__ import annotations

import pytest

from tests.conftest import cli, write_config


def _config(tmp_path, model: str, extra: str = ""):
    return write_config(
        tmp_path,
        f"""
        name = "s"
        jobs = ["paired"]
        samples = 1
        output_dir = "{tmp_path / "runs"}"
        {extra}
        [[models]]
        {model}
        """,
    )


@pytest.mark.parametrize("value", ["sk-abc123\r", "sk-abc\n123"])
def test_a_key_with_a_control_character_is_refused_naming_the_variable(
    tmp_path, monkeypatch, value
):
    monkeypatch.setenv("MY_KEY", value)
    config = _config(
        tmp_path,
        'provider = "openai"\nname = "gpt-4o"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "MY_KEY"',
    )
    done = cli("run", str(config), cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "MY_KEY holds a control character" in said
    assert "models[0].api_key_env" in said and "abc" not in said  # never the value
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


SIM = 'provider = "simulated"\nname = "sim"\ntemperature = 1.0'


@pytest.mark.parametrize(
    ("extra", "field"), [('run_id = ".."', "run_id"), ('run_id = "."', "run_id")]
)
def test_a_run_id_that_is_a_path_is_refused(tmp_path, extra, field):
    done = cli("run", str(_config(tmp_path, SIM, extra)), cwd=tmp_path)
    assert done.returncode == 2 and field in done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_campaign_name_that_is_a_path_is_refused(tmp_path):
    config = _config(tmp_path, SIM)
    config.write_text(config.read_text().replace('name = "s"', 'name = ".."', 1))
    done = cli("run", str(config), cwd=tmp_path)
    assert done.returncode == 2 and "name" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_what_a_run_writes_is_the_users_alone(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        assert cli("run", str(_config(tmp_path, SIM)), cwd=tmp_path).returncode == 0
    finally:
        os.umask(old)
    run = tmp_path / "runs" / "s" / "default"
    assert (run.stat().st_mode & 0o777) == 0o700
    assert ((tmp_path / "runs" / "s").stat().st_mode & 0o777) == 0o700
    for name in ("manifest.json", "results.ndjson"):
        assert ((run / name).stat().st_mode & 0o777) == 0o600, name
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


def test_a_symlinked_results_file_is_refused_and_its_target_untouched(tmp_path):
    config = _config(tmp_path, SIM)
    assert cli("run", str(config), cwd=tmp_path).returncode == 0
    run = tmp_path / "runs" / "s" / "default"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run / "results.ndjson").unlink()
    (run / "results.ndjson").symlink_to(victim)
    done = cli("run", str(config), cwd=tmp_path)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "symbolic link" in said
    assert victim.read_text() == "precious\n"


def test_a_link_at_the_old_fixed_temporary_name_is_not_followed(tmp_path):
    config = _config(tmp_path, SIM)
    run = tmp_path / "runs" / "s" / "default"
    run.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run / "manifest.tmp").symlink_to(victim)
    assert cli("run", str(config), cwd=tmp_path).returncode == 0
    assert victim.read_text() == "precious\n"


def test_a_short_key_is_not_masked_inside_words_and_a_real_one_is():
    """Issue 32, item 2: local servers are given keys like x, EMPTY or none."""
    from orchestrator.providers.safety import secret_pattern

    message = "Maximum request body size exceeded for key x (EMPTY)"
    for short in ("x", "EMPTY", "none"):
        pattern = secret_pattern([short])
        assert pattern is None  # not a secret: nothing masked, the message stays readable
    key = "sk-proj-abcdef0123456789"
    masked = secret_pattern([key, "x"]).sub("***", f"{message}; sent {key}, again '{key}'")
    assert masked == f"{message}; sent ***, again '***'"
    assert secret_pattern([key]).sub("***", f"xx{key}yy") == "xx***yy"  # a long one anywhere
    mid = "abcd1234"  # 8 to 19 characters: a whole token only
    assert secret_pattern([mid]).sub("***", f"{mid} and xx{mid}") == f"*** and xx{mid}"


def test_the_cache_and_its_wal_are_the_users_alone(tmp_path):
    import os

    from orchestrator.cache.store import ResponseCache
    from orchestrator.providers.base import Completion

    old = os.umask(0o022)
    try:
        cache = ResponseCache(tmp_path / "c" / "r.sqlite", "run", read=True, warn=pytest.fail)
        cache.put(b"k" * 16, Completion("{}", usage={"prompt_tokens": 1}), "m")
        cache.flush()
        made = [p for p in (tmp_path / "c").iterdir()]
        assert {p.name for p in made} >= {"r.sqlite", "r.sqlite-wal"}
        assert all(p.stat().st_mode & 0o777 == 0o600 for p in made), [
            (p.name, oct(p.stat().st_mode)) for p in made
        ]
        assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700
        cache.close()
    finally:
        os.umask(old)


def test_a_nightly_log_and_its_folders_are_private(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        done = cli("run", str(_config(tmp_path, SIM)), "--log", "auto", cwd=tmp_path)
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    logs = tmp_path / "runs" / "s" / "logs"
    assert (logs.stat().st_mode & 0o777) == 0o700
    assert ((tmp_path / "runs" / "s").stat().st_mode & 0o777) == 0o700
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in logs.iterdir())

"""The token Ray's token authentication needs on the run's own cluster (cluster/token.py), and
what the run says when a cluster does not start: no Ray is needed for these."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from orchestrator.cluster.head import start_failure
from orchestrator.cluster.token import default_path, ensure_token
from orchestrator.errors import UserError

# What `ray start --head` printed on a machine with no token (Ray 2.60, RAY_AUTH_MODE=token).
RAY_NO_TOKEN = """\
  File "ray/scripts/scripts.py", line 1072, in start
    ensure_token_if_auth_enabled(system_config, create_token_if_missing=False)
  File "ray/_private/authentication/authentication_token_setup.py", line 162, in ensure_token_if_auth_enabled
    raise AuthenticationError(
ray.exceptions.AuthenticationError: Token authentication is enabled but no authentication token was found. Ensure that the token for the cluster is available in a local file (e.g., ~/.ray/auth_token or via RAY_AUTH_TOKEN_PATH) or as the `RAY_AUTH_TOKEN` environment variable.
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home that never ran Ray, and no token in the environment."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    return tmp_path


def test_a_missing_token_is_created_where_ray_looks_for_this_user_alone_and_said_once(home):
    said: list[str] = []
    token = home / ".ray" / "auth_token"
    assert default_path() == token
    assert ensure_token(said.append) == token  # named to Ray by path, so it reads this very file
    value = token.read_text()
    assert len(value) == 64 and int(value, 16) >= 0  # 256 random bits, as Ray's own generator
    assert token.stat().st_mode & 0o777 == 0o600 and token.parent.stat().st_mode & 0o777 == 0o700
    assert len(said) == 1 and str(token) in said[0] and value not in said[0]
    assert not [p for p in token.parent.iterdir() if p.name.startswith(".auth_token.new")]

    assert ensure_token(said.append) == token  # the next run finds it: kept, nothing said
    assert token.read_text() == value and len(said) == 1


def test_without_home_the_token_is_where_ray_then_looks(home, monkeypatch):
    monkeypatch.delenv("HOME")  # cron, services: Ray's loader then takes the current folder
    monkeypatch.chdir(home)
    assert default_path() == home / ".ray" / "auth_token"


def test_runs_starting_together_make_one_token_and_one_says_so(home):
    said: list[str] = []
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda _: ensure_token(said.append), range(8)))
    assert set(paths) == {home / ".ray" / "auth_token"} and len(said) == 1


def test_a_token_the_user_has_is_never_replaced(home, monkeypatch):
    token = home / ".ray" / "auth_token"
    token.parent.mkdir()
    token.write_text("the-users-own-token\n")
    said: list[str] = []
    assert ensure_token(said.append) == token
    assert token.read_text() == "the-users-own-token\n" and not said

    token.unlink()
    monkeypatch.setenv("RAY_AUTH_TOKEN", "from-the-environment")
    assert ensure_token(said.append) is None
    assert not token.exists() and not said

    monkeypatch.delenv("RAY_AUTH_TOKEN")
    (named := home / "named-token").write_text("x" * 64)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    assert ensure_token(said.append) == named
    assert not token.exists() and not said


@pytest.mark.parametrize("content", ["", "\n", "\nthe token on line two\n"])
def test_a_token_file_ray_cannot_read_is_an_error_not_replaced(home, content):
    token = home / ".ray" / "auth_token"
    token.parent.mkdir()
    token.write_text(content)  # Ray reads the first line only: for it, there is no token here
    with pytest.raises(UserError) as caught:
        ensure_token(lambda _: None)
    assert str(token) in str(caught.value) and "first line" in caught.value.fix
    assert token.read_text() == content


def test_a_token_variable_naming_no_token_is_an_error(home, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(home / "missing"))
    with pytest.raises(UserError) as caught:
        ensure_token(lambda _: None)
    assert caught.value.exit_code == 2 and "RAY_AUTH_TOKEN_PATH" in str(caught.value)
    assert "ray get-auth-token" in caught.value.fix
    assert not (home / "missing").exists() and not (home / ".ray").exists()

    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "  ")
    with pytest.raises(UserError, match="RAY_AUTH_TOKEN is set but empty"):
        ensure_token(lambda _: None)
    assert not (home / ".ray").exists()


def test_a_token_that_cannot_be_written_is_a_clear_error(home):
    (home / ".ray").write_text("a file where Ray's folder should be")
    with pytest.raises(UserError) as caught:
        ensure_token(lambda _: None)
    assert "none could be created" in str(caught.value) and caught.value.field == "models[].server"


def test_a_cluster_refused_for_want_of_a_token_says_so_not_to_wait_longer():
    error = start_failure(RAY_NO_TOKEN, 120, exited=True)
    assert "want of a token" in str(error) and "no authentication token was found" in str(error)
    assert "startup_timeout_s" not in str(error) and "ray get-auth-token" in error.fix


def test_a_cluster_that_stopped_while_starting_is_not_blamed_on_the_timeout():
    error = start_failure(
        "Traceback ...\nOSError: [Errno 28] No space left on device", 120, exited=True
    )
    assert "stopped while starting" in str(error) and "No space left" in str(error)
    assert error.field == "models[].server.backend" and "startup_timeout_s" not in error.fix

    slow = start_failure("Local node IP: 127.0.0.1\n", 120, exited=False)
    assert "did not start within 120 s" in str(slow) and slow.field.endswith("startup_timeout_s")

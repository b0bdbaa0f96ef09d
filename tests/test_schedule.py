"""`orchestrator schedule`: the crontab line it prints is run as cron runs it (its command with
`bash -c`, from another folder, `\\%` unescaped), the systemd units run the same command, and
--install writes the units and enables the timer (with a stand-in systemctl)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import cli, write_config

SIMULATED = """
    name = "nightly"
    jobs = ["paired"]
    seed = 5
    [[models]]
    provider = "simulated"
    name = "sim-respondent"
    temperature = 1.0
    [models.simulate.effects.anchoring-first-number]
    conditions = [{mean = 1150, sd = 120}, {mean = 880, sd = 120}]
    """


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


def schedule(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return cli("schedule", *args, cwd=cwd, timeout=120)


def crontab_line(out: str) -> str:
    [line] = [x for x in out.splitlines() if re.match(r"\d+ \d+ \* \* \* ", x)]
    return line


def run_as_cron(line: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """The line's command as cron hands it to the shell, started in a folder of its own (cron
    starts in $HOME): the `cd` in it must take the run to the folder the schedule was made in."""
    command = line.split(None, 5)[5].replace("\\%", "%")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", "-c", command], cwd=elsewhere, capture_output=True, text=True, timeout=300
    )


def unit_value(out: str, key: str) -> str:
    [value] = [x.split("=", 1)[1] for x in out.splitlines() if x.startswith(f"{key}=")]
    return value


def files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_scheduled_command_runs_each_night_into_a_new_dated_folder(tmp_path):
    (tmp_path / "configs").mkdir()  # the config elsewhere than the runs: its path is absolute
    config = write_config(tmp_path / "configs", SIMULATED, name="nightly.toml")
    work = tmp_path / "my nights"  # a space: the command's quoting is run, not just read
    work.mkdir()
    made = schedule(str(config), "--at", "02:00", cwd=work)
    assert made.returncode == 0, made.stderr
    line = crontab_line(made.stdout)
    assert line.startswith("0 2 * * * ")
    campaign = work / "runs" / "nightly"

    day = today()
    first = run_as_cron(line, tmp_path)
    if today() != day:
        pytest.skip("the UTC date changed during the run")
    assert first.returncode == 0, first.stderr
    assert os.readlink(campaign / "latest") == day and (campaign / day / "results.ndjson").is_file()
    log = (campaign / "logs" / f"{day}.log").read_text().splitlines()
    assert log[0].startswith("== ") and " run " in log[0] and "--run-id auto" in log[0]
    assert re.fullmatch(r"== \S+ exit 0", log[-1])
    night_one = files(campaign / day) | {
        campaign / "logs" / f"{day}.log": (campaign / "logs" / f"{day}.log").read_bytes()
    }

    second = run_as_cron(line, tmp_path)
    if today() != day:
        pytest.skip("the UTC date changed during the run")
    assert second.returncode == 0, second.stderr
    assert (
        os.readlink(campaign / "latest") == f"{day}-2"
        and (campaign / f"{day}-2" / "results.ndjson").is_file()
    )
    assert (campaign / "logs" / f"{day}-2.log").read_text().splitlines()[-1].endswith("exit 0")
    assert {p: p.read_bytes() for p in night_one} == night_one  # the first night, never touched
    assert files(campaign / day).keys() == night_one.keys() - {campaign / "logs" / f"{day}.log"}


def test_a_missing_key_fails_the_night_with_the_reason_in_the_log_and_the_key_file_supplies_it(
    tmp_path, emulator, monkeypatch
):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SCHEDULE_TEST_KEY", raising=False)
    server = emulator()
    config = write_config(
        tmp_path,
        f"""
        name = "keyed"
        jobs = ["paired"]
        samples = 2
        [[models]]
        provider = "openai"
        name = "fake-model"
        base_url = "{server.base_url("openai")}"
        api_key_env = "SCHEDULE_TEST_KEY"
        temperature = 0.7
        """,
    )
    made = schedule(str(config), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    env_file = home / ".config" / "orchestrator" / "keyed.env"
    assert "SCHEDULE_TEST_KEY" in made.stdout and f"{env_file} (not there yet)" in made.stdout
    assert unit_value(made.stdout, "EnvironmentFile") == "%h/.config/orchestrator/keyed.env"
    line = crontab_line(made.stdout)
    assert str(env_file) in line

    env_file.parent.mkdir(parents=True)
    env_file.write_text("OTHER_VARIABLE=1\n")  # the file is there, the key is not
    day = today()
    failed = run_as_cron(line, tmp_path)
    if today() != day:
        pytest.skip("the UTC date changed during the run")
    assert failed.returncode == 2
    log = (tmp_path / "runs" / "keyed" / "logs" / f"{day}.log").read_text()
    assert "environment variable SCHEDULE_TEST_KEY is not set" in log and log.rstrip().endswith(
        "exit 2"
    )
    assert not (tmp_path / "runs" / "keyed" / day).exists() and not server.log.arrivals

    env_file.write_text("SCHEDULE_TEST_KEY=sk-test-do-not-print-3141\n")
    done = run_as_cron(line, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "runs" / "keyed" / day / "results.ndjson").is_file() and server.log.arrivals
    written = (
        b"".join(files(tmp_path / "runs").values()) + made.stdout.encode() + done.stdout.encode()
    )
    assert b"sk-test-do-not-print-3141" not in written


def test_the_systemd_units_run_the_cron_command_at_the_same_time(tmp_path):
    work = tmp_path / "100% $ure"  # cron's % and systemd's % and $ specifiers, escaped
    work.mkdir()
    config = write_config(work, SIMULATED)
    made = schedule(str(config), "--at", "7:05", "--budget", "2.5", cwd=work)
    assert made.returncode == 0, made.stderr
    line = crontab_line(made.stdout)
    assert (
        line.startswith("5 7 * * * ") and "100\\% $ure" in line and not re.search(r"[^\\]%", line)
    )
    assert "100%% $$ure" in unit_value(made.stdout, "ExecStart") and "100%% $$ure" in unit_value(
        made.stdout, "WorkingDirectory"
    )
    cd, command = re.fullmatch(
        r"cd (.+?) && (.+) >/dev/null", line.split(None, 5)[5].replace("\\%", "%")
    ).groups()
    unescape = lambda text: text.replace("%%", "%").replace("$$", "$")
    assert unescape(unit_value(made.stdout, "WorkingDirectory")) == shlex.split(cd)[0] == str(work)
    assert shlex.split(unescape(unit_value(made.stdout, "ExecStart"))) == shlex.split(command)
    assert shlex.split(command)[-8:] == [
        "run",
        str(config),
        "--run-id",
        "auto",
        "--log",
        "auto",
        "--budget",
        "2.5",
    ]
    assert unit_value(made.stdout, "OnCalendar") == "*-*-* 07:05:00"
    assert (
        unit_value(made.stdout, "Persistent") == "true"
        and unit_value(made.stdout, "Type") == "oneshot"
    )


def fake_systemctl(tmp_path: Path, fails: bool = False) -> Path:
    """A systemctl that records its arguments: the OS service manager (systemd as PID 1 with a
    user bus) does not run in a test container, so what is tested is what we ask of it."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "systemctl"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {shlex.quote(str(tmp_path / "calls"))}\n'
        + ('echo "Failed to connect to bus: No medium found" >&2; exit 1\n' if fails else "")
    )
    script.chmod(0o755)
    return folder


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []


def test_install_writes_the_units_then_reloads_and_enables_the_timer(tmp_path, monkeypatch):
    config = write_config(tmp_path, SIMULATED)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PATH", f"{fake_systemctl(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    made = schedule(str(config), "--at", "03:30", "--install", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    units = tmp_path / "xdg" / "systemd" / "user"
    service, timer = (
        (units / "orchestrator-nightly.service").read_text(),
        (units / "orchestrator-nightly.timer").read_text(),
    )
    assert f"ExecStart={unit_value(made.stdout, 'ExecStart')}\n" in service
    assert "OnCalendar=*-*-* 03:30:00\n" in timer and "WantedBy=timers.target" in timer
    assert calls(tmp_path) == [
        "--user daemon-reload",
        "--user enable --now orchestrator-nightly.timer",
    ]

    again = schedule(
        str(config), "--at", "03:30", "--install", cwd=tmp_path
    )  # the same units: fine
    assert again.returncode == 0, again.stderr
    other = schedule(str(config), "--at", "04:00", "--install", cwd=tmp_path)
    assert other.returncode == 2 and "--force" in other.stderr and not other.stdout
    assert (units / "orchestrator-nightly.timer").read_text() == timer and len(calls(tmp_path)) == 4
    forced = schedule(str(config), "--at", "04:00", "--install", "--force", cwd=tmp_path)
    assert (
        forced.returncode == 0 and "04:00:00" in (units / "orchestrator-nightly.timer").read_text()
    )


def test_install_reports_a_failing_systemctl_and_leaves_the_units(tmp_path, monkeypatch):
    config = write_config(tmp_path, SIMULATED)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(
        "PATH", f"{fake_systemctl(tmp_path, fails=True)}{os.pathsep}{os.environ['PATH']}"
    )
    made = schedule(str(config), "--install", cwd=tmp_path)
    units = tmp_path / "xdg" / "systemd" / "user"
    assert made.returncode == 1 and "Failed to connect to bus" in made.stderr
    assert (
        str(units) in " ".join(made.stderr.split())
        and (units / "orchestrator-nightly.timer").is_file()
    )


def test_install_without_systemctl_writes_nothing(tmp_path, monkeypatch):
    config = write_config(tmp_path, SIMULATED)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    made = schedule(str(config), "--install", cwd=tmp_path)
    assert made.returncode == 2 and "systemctl" in made.stderr and "crontab" in made.stderr
    assert not (tmp_path / "xdg").exists() and not made.stdout


@pytest.mark.parametrize("at", ["25:00", "2am", "02:60", "0200", ""])
def test_a_bad_time_is_refused_before_anything_is_written(tmp_path, monkeypatch, at):
    config = write_config(tmp_path, SIMULATED)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PATH", f"{fake_systemctl(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    made = schedule(str(config), "--at", at, "--install", cwd=tmp_path)
    assert (
        made.returncode == 2
        and "--at" in made.stderr
        and "HH:MM" in made.stderr
        and not made.stdout
    )
    assert not (tmp_path / "xdg").exists() and not calls(tmp_path)


def test_a_bad_config_is_refused_naming_the_field(tmp_path):
    config = write_config(
        tmp_path, SIMULATED.replace('provider = "simulated"', 'provider = "nope"')
    )
    made = schedule(str(config), cwd=tmp_path)
    assert (
        made.returncode == 2
        and "models[0].provider" in " ".join(made.stderr.split())
        and not made.stdout
    )
    assert not (tmp_path / "runs").exists()


def test_the_command_is_the_venv_script_else_python_dash_m(tmp_path, monkeypatch):
    from orchestrator.nightly.schedule import orchestrator_argv

    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    monkeypatch.setattr("sys.executable", str(venv / "python"))
    assert orchestrator_argv() == [str(venv / "python"), "-m", "orchestrator"]  # no script there
    (venv / "orchestrator").write_text("#!/bin/sh\n")
    (venv / "orchestrator").chmod(0o755)
    assert orchestrator_argv() == [str(venv / "orchestrator")]


@pytest.mark.parametrize(
    "folder", ["runs\nExecStartPre=touch pwned\n", "tab\there", "esc\x1b[2J", "ends-in\\"]
)
def test_a_folder_name_cannot_write_directives_into_the_unit(tmp_path, monkeypatch, folder):
    work = tmp_path / folder
    work.mkdir(parents=True)
    config = write_config(work, SIMULATED)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PATH", f"{fake_systemctl(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    made = schedule(str(config), "--install", cwd=work)
    said = " ".join(made.stderr.split())
    assert made.returncode == 2 and "control character" in said, made.stdout + made.stderr
    assert "ExecStartPre" not in made.stdout  # nothing printed, nothing installed
    assert not (tmp_path / "xdg").exists() and not calls(tmp_path)

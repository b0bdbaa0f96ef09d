"""`orchestrator schedule`: a nightly run with the tools people already use, cron or a systemd
user timer. It prints both (and with --install sets up the timer); it never writes or reads a key.

The scheduled command is `run CONFIG --run-id auto --log auto` from the folder `schedule` was
given in, so the runs land where they would if the user ran it there: each night a new run
folder named by the UTC date, the run lock, a log under runs/<campaign>/logs/, a non-zero exit
on failure. A test runs the exact command printed (tests/test_schedule.py).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.spec.campaign import Campaign

AT = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")
EXITS = "exit 0 done, 1 some tasks failed, 2 bad input or the run in use, 3 budget reached"


@dataclass
class Schedule:
    campaign: str
    hour: int
    minute: int
    workdir: Path  # where `schedule` was run: the runs land as they would from here
    argv: list[str]  # the run command, from workdir
    keys: list[str]  # the API key variables the config names (names only)
    env_file: Path  # the user's NAME=value file for them: systemd reads it, cron sources it
    log_dir: Path

    @property
    def unit(self) -> str:
        return f"orchestrator-{self.campaign}"

    @property
    def at(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d}"


def parse_at(text: str) -> tuple[int, int]:
    if not (m := AT.fullmatch(text.strip())):
        raise UserError(
            f"'{text}' is not a time of day",
            field="--at",
            fix="give the local time as HH:MM on a 24-hour clock, e.g. --at 02:00",
        )
    return int(m[1]), int(m[2])


def orchestrator_argv() -> list[str]:
    """This install's command, absolute: cron and systemd have a bare PATH and no venv. The
    venv's `orchestrator` script sits next to its python (not resolved: the link is the venv)."""
    script = Path(os.path.abspath(sys.executable)).parent / "orchestrator"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [os.path.abspath(sys.executable), "-m", "orchestrator"]


def key_variables(campaign) -> list[str]:
    models = [*campaign.config.models, *(m for _, m in campaign.config.helpers())]
    return sorted({m.api_key_env for m in models if m.api_key_env})


def make_schedule(
    config: Path, at: str, budget: float | None, load_campaign: Callable[[Path], Campaign]
) -> Schedule:
    """Check everything first (the config as `run` would load it, --at, --budget): a bad
    schedule fails tonight, unseen, so it is refused here with nothing written.
    `load_campaign`: orchestrator.session's, with the registered studies."""
    hour, minute = parse_at(at)
    if budget is not None and not (math.isfinite(budget) and budget >= 0):
        raise UserError(
            f"must be a finite number >= 0, not {budget}",
            field="--budget",
            fix="give the USD each night may spend, e.g. --budget 5",
        )
    if config.is_dir():
        raise UserError(
            "schedule takes a campaign config, not a run folder",
            file=str(config),
            fix="give the config (TOML): each night starts a new run of it",
        )
    campaign = load_campaign(config)
    name, workdir = campaign.config.name, Path.cwd()
    _no_control_characters(workdir, "the current folder", None)
    _no_control_characters(config.resolve(), "the config's path", "CONFIG")
    _no_control_characters(Path(sys.executable), "this install's python", "CONFIG")
    _no_control_characters(Path.home(), "the home folder (where the key file goes)", None)
    argv = [*orchestrator_argv(), "run", str(config.resolve()), "--run-id", "auto", "--log", "auto"]
    if budget is not None:
        argv += ["--budget", repr(budget)]
    return Schedule(
        name,
        hour,
        minute,
        workdir,
        argv,
        key_variables(campaign),
        Path.home() / ".config" / "orchestrator" / f"{name}.env",
        workdir / campaign.config.output_dir / name / "logs",
    )


# What a systemd unit or a crontab line cannot hold safely: a newline would start a directive or
# a job of its own (an ExecStartPre= of the folder name's choosing), and no other control
# character has any business in a path. (`%` is escaped where each format needs it.)
# A backslash at a line's end continues a systemd line into the next: refused too.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f\\]")


def _no_control_characters(path: Path, what: str, field: str | None) -> None:
    if _UNSAFE.search(str(path)):
        raise UserError(
            f"{what} holds a newline, another control character or a backslash "
            f"({str(path)!r}): a systemd unit or crontab line made from it would run more "
            "than the nightly command",
            field=field,
            fix="run schedule from, and with a config in, a folder whose path has none",
        )


def cron_command(s: Schedule) -> str:
    """What cron hands to /bin/sh. stdout goes only to the log (the run tees it there), so cron
    mails just what the run writes to stderr: its errors."""
    keys = f"set -a && . {shlex.quote(str(s.env_file))} && set +a && " if s.keys else ""
    return f"{keys}cd {shlex.quote(str(s.workdir))} && {shlex.join(s.argv)} >/dev/null"


def crontab_line(s: Schedule) -> str:
    return f"{s.minute} {s.hour} * * * " + cron_command(s).replace(
        "%", "\\%"
    )  # cron: % is a newline


def _systemd(text: str) -> str:
    return text.replace("%", "%%").replace("$", "$$")  # specifiers and variables, taken literally


def service_unit(s: Schedule) -> str:
    env = f"EnvironmentFile=%h/.config/orchestrator/{s.campaign}.env\n" if s.keys else ""
    return (
        f"[Unit]\nDescription=orchestrator: nightly run of campaign {s.campaign}\n\n"
        f"[Service]\nType=oneshot\nWorkingDirectory={_systemd(str(s.workdir))}\n{env}"
        f"ExecStart={_systemd(shlex.join(s.argv))}\n"
    )


def timer_unit(s: Schedule) -> str:
    # Persistent: a night missed (machine off) runs at the next boot.
    return (
        f"[Unit]\nDescription=orchestrator: campaign {s.campaign} every night at {s.at}\n\n"
        f"[Timer]\nOnCalendar=*-*-* {s.at}:00\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n"
    )


def unit_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "systemd" / "user"


def next_start(s: Schedule, now: datetime | None = None) -> datetime:
    """The next run's start, in local time (cron's and systemd's clock)."""
    now = now or datetime.now()  # naive local: astimezone() then gives that day's offset (DST)
    start = now.replace(hour=s.hour, minute=s.minute, second=0, microsecond=0)
    return (start if start > now else start + timedelta(days=1)).astimezone()


def explain(s: Schedule) -> str:
    start = next_start(s)
    utc = start.astimezone(UTC)
    lines = [
        f"# campaign {s.campaign}: every night at {s.at}, this machine's local time "
        f"(UTC{start.isoformat()[-6:]} then).",
        f"# The run id is the UTC date at the start: the next run, {start:%Y-%m-%d %H:%M} local "
        f"({utc:%H:%M} UTC), will be {s.log_dir.parent / f'{utc:%Y-%m-%d}'} (-2 if that day has one).",
        f"# Each run's log: {s.log_dir}/<run-id>.log; {EXITS}.",
        "#",
    ]
    if s.keys:
        there = "" if s.env_file.is_file() else " (not there yet)"
        lines += [
            f"# API keys: the runs need {', '.join(s.keys)}. cron and systemd do not see your shell's",
            f"# environment: put one NAME=value line each in {s.env_file}{there},",
            "# then chmod 600 it. Both schedules below read that file; this tool never writes a key.",
            "#",
        ]
    lines += [
        "# 1. cron (crontab -e). cron mails what the run writes to stderr (its errors) to MAILTO,",
        "#    if a MAILTO=you@example.com line stands above this one:",
        crontab_line(s),
        "#",
        "# 2. a systemd user timer (orchestrator schedule ... --install sets it up):",
        f"# {unit_dir() / (s.unit + '.service')}",
        service_unit(s).rstrip(),
        f"# {unit_dir() / (s.unit + '.timer')}",
        timer_unit(s).rstrip(),
        f"# then: systemctl --user daemon-reload && systemctl --user enable --now {s.unit}.timer",
        "# To run while you are logged out: loginctl enable-linger $USER. The runs: "
        f"systemctl --user list-timers; journalctl --user -u {s.unit}.service",
    ]
    return "\n".join(lines) + "\n"


def install(s: Schedule, force: bool) -> tuple[Path, str | None]:
    """Write the two units and enable the timer: (unit folder, systemctl's stderr if it failed).
    Everything is checked before the first file is written."""
    if shutil.which("systemctl") is None:
        raise UserError(
            "systemctl is not on PATH, so no systemd timer can be installed here",
            field="--install",
            fix="drop --install and add the printed line with crontab -e",
        )
    folder = unit_dir()
    units = {
        folder / f"{s.unit}.service": service_unit(s),
        folder / f"{s.unit}.timer": timer_unit(s),
    }
    for path, text in units.items():
        if path.exists() and not force and path.read_text(encoding="utf-8") != text:
            raise UserError(
                "a different unit file of that name exists",
                file=path,
                fix="add --force to replace it, or rename the campaign",
            )
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in units.items():
        path.write_text(text, encoding="utf-8")
    for args in (["daemon-reload"], ["enable", "--now", f"{s.unit}.timer"]):
        done = subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True)
        if done.returncode != 0:
            return (
                folder,
                f"systemctl --user {' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}",
            )
    return folder, None

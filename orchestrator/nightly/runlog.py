"""`run --log`: what a run prints, also appended to a log file (a scheduled run has no terminal).

The log lives beside the runs, at runs/<campaign>/logs/<run-id>.log, not in the run folder:
a run refused before it starts (a missing key, a bad config) writes no run folder, yet its
reason must reach the log cron or systemd keeps.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from rich.console import Console

from orchestrator.engine.files import folder_within, open_append, private_folder
from orchestrator.errors import UserError

AUTO = "auto"


class Tee:
    """A text stream writing to a terminal stream and a log file."""

    def __init__(self, stream: IO[str], log: IO[str]) -> None:
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.log.write(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()
        self.log.flush()

    def isatty(self) -> bool:
        return False  # no live progress bar in a log: rich prints plain lines instead

    def fileno(self) -> int:
        return self.stream.fileno()


def log_path(given: str, campaign_dir: Path, run_id: str) -> Path:
    """The log file: auto's beside the runs (its folder made), or the one given, in a folder
    that exists (a typo must not create folders elsewhere)."""
    if given == AUTO:  # a campaign folder may come from someone else: never a linked logs/
        return folder_within(campaign_dir, campaign_dir / "logs", make=False) / f"{run_id}.log"
    path = Path(given)
    if path.is_dir():
        raise UserError(
            "--log names a folder, not a file",
            file=given,
            field="--log",
            fix="give a file, e.g. --log nightly.log, or --log auto",
        )
    if not path.parent.is_dir():
        raise UserError(
            "--log's folder does not exist",
            file=given,
            field="--log",
            fix=f"create {path.parent} first, or use --log auto",
        )
    from orchestrator.engine.store import MANIFEST

    for folder in path.resolve().parents:  # a run folder holds its run alone (its results...)
        if (folder / MANIFEST).is_file():
            raise UserError(
                f"--log is inside the run folder {folder}",
                file=given,
                field="--log",
                fix="use --log auto (runs/<campaign>/logs/), or a file outside the runs",
            )
    return path


@contextmanager
def logging_to(path: Path, command: str) -> Iterator[tuple[Console, Console]]:
    """(console, err_console) that also append to `path`, between a start and an end line."""
    private_folder(path.parent)  # a log quotes the run's errors and its campaign's names
    # a log is read in an editor or a mail, not a terminal: no message is wrapped (soft_wrap),
    # and tables are drawn at least 160 wide
    width = max(160, int(os.environ.get("COLUMNS") or 0))
    with open_append(path, text=True) as log:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        log.write(f"== {stamp} {command}\n")
        code = "1"
        try:
            yield (
                Console(file=Tee(sys.stdout, log), width=width, soft_wrap=True),
                Console(file=Tee(sys.stderr, log), width=width, soft_wrap=True),
            )
            code = "0"
        except SystemExit as exc:
            code = str(exc.code)
            raise
        except BaseException as exc:
            code = str(getattr(exc, "exit_code", type(exc).__name__))
            raise
        finally:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            log.write(f"== {stamp} exit {code}\n")

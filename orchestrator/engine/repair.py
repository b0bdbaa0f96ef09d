"""`orchestrator repair`: move the lines of results.ndjson that are not records out of the way.

Nothing is ever deleted. Every line that a full JSON parse does not read as one of our records
(blank, garbage, another program's JSON, a torn line, a record glued to a torn line) is
appended to results.rejected.ndjson beside it, and fsynced there, before results.ndjson is
replaced, through a temporary file and os.replace, by the lines that are records. A crash at
any point leaves the old results file, or the new one; at worst a second repair appends the
same rejected lines again.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.engine.files import open_append
from orchestrator.engine.results import REJECTED, RESULTS, check_results_path, json_fields, why_not
from orchestrator.errors import UserError

_SHOWN = 20


@dataclass
class Repair:
    rejected: Path
    moved: list[tuple[int, str]] = field(default_factory=list)  # the first few: (line number, why)
    moved_count: int = 0
    kept: int = 0


def repair_results(path: Path) -> Repair:
    check_results_path(path)
    done = Repair(path.with_name(REJECTED))
    if done.rejected.exists() and not done.rejected.is_file():
        raise UserError(
            f"{REJECTED} is a folder, not a file",
            file=str(done.rejected),
            fix="move it away, then run repair again",
        )
    if not path.exists():
        return done
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{RESULTS}.", suffix=".repair.tmp")
    os.close(fd)  # made exclusively, 0600: no link someone placed at a fixed name is followed
    tmp = Path(name)
    out = None  # results.rejected.ndjson, opened at the first bad line
    try:
        with open(path, "rb") as src, open(tmp, "wb") as good:
            for number, line in enumerate(src, 1):
                if json_fields(line) is not None:
                    good.write(line)
                    done.kept += 1
                    continue
                done.moved_count += 1
                if len(done.moved) < _SHOWN:
                    done.moved.append((number, why_not(line)))
                out = out or open_append(done.rejected)
                out.write(line if line.endswith(b"\n") else line + b"\n")
            good.flush()
            os.fsync(good.fileno())
        if out is not None:  # the moved lines are on disk before the file that held them goes
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if out is not None:
            out.close()
    if out is None:
        tmp.unlink()
        return done
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return done


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""The one reader of names out of a run folder's files (manifest, batch journal, snapshot,
records). A run folder may come from someone else, so a name it holds is a name, never a path:
it is checked against its pattern before it takes part in a file name, and a name that fails
is refused with the file and field that held it (or, for a derived file such as the snapshot,
the file is not used)."""

from __future__ import annotations

import re
from typing import Any

from orchestrator.errors import UserError

# A plain name: no separator, no leading dot (so neither `.` nor `..`, nor a hidden file).
PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# A snapshot part (engine/columnar.py) and a batch's input file (batch/submit.py), as written.
SNAPSHOT_PART = re.compile(r"part-[0-9a-f]{12}\.parquet")
# A provider's id of a batch or a file (batch_..., msgbatch_..., batches/..., file-...): it goes
# into the provider's URLs, so never a path of its own (no `..`, no query, at most one `/`).
PROVIDER_ID = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,255}(?:/[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,255})?"
)
BATCH_INPUT = re.compile(r"batches/([A-Za-z0-9][A-Za-z0-9._-]{0,127}\.jsonl)")


def is_plain(value: Any) -> bool:
    return isinstance(value, str) and PLAIN.fullmatch(value) is not None


def plain(value: Any, file: str, field: str) -> str:
    """`value` as a plain name (PLAIN), or a UserError naming where it was read."""
    if is_plain(value):
        return value
    raise UserError(
        f"{field} is not a plain name ({_shown(value)}): a name read from a run folder never "
        "takes part in a path unless it is one",
        file=file,
        field=field,
        fix="this run folder was edited or made by another program; restore it from the copy "
        "it came from",
    )


def model_key(value: Any, file: str) -> str:
    """A record's `modelKey` (12 hex digits as this tool writes it), as a plain name: it names
    export files and figures."""
    if is_plain(value):
        return value
    raise UserError(
        f"modelKey is not a plain name ({_shown(value)}): it names export files, so it is "
        "never a path",
        file=file,
        field="modelKey",
        fix="this run folder was edited or made by another program; restore it from the copy "
        "it came from",
    )


def batch_input(value: Any, file: str) -> str:
    """The file name of a batch's input (`batches/<name>.jsonl` in the journal)."""
    if isinstance(value, str) and (found := BATCH_INPUT.fullmatch(value)):
        return found.group(1)
    raise UserError(
        f"a batch's input is not a batch input file of this run ({_shown(value)})",
        file=file,
        field="input",
        fix="restore the batch journal from the copy it came from; never edit it by hand (it "
        "records which batches were paid for)",
    )


def provider_id(value: Any, file: str, field: str) -> str:
    """A batch's or a file's id at the provider, as a batch journal holds it (PROVIDER_ID)."""
    if isinstance(value, str) and PROVIDER_ID.fullmatch(value) and ".." not in value:
        return value
    raise UserError(
        f"{field} is not a provider's id ({_shown(value)}): it goes into the provider's URLs",
        file=file,
        field=field,
        fix="restore the batch journal from the copy it came from; never edit it by hand (it "
        "records which batches were paid for)",
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

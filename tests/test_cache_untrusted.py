"""A response cache file may be shared, so its rows are untrusted: a row this tool would not
have written (a field of the wrong type, over the bounds answers from the wire have, a run id
that is no run id) is a miss, paid again, and said once, never served and never a traceback."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import orjson
import pytest

from orchestrator.providers.http import MAX_ANSWER_BYTES
from tests.test_cache import TASKS, config, records, run

BIG = "x" * (MAX_ANSWER_BYTES + 1)  # one byte past what a server may answer
WIDE = "\u00e9" * (MAX_ANSWER_BYTES // 2 + 1)  # within the bound in characters, past it in bytes
POISONED = 2  # rows planted per case: both paid again, one warning for both


class AsText(bytes):
    """Bytes planted as TEXT, not as a blob: SQLite takes them unchecked, UTF-8 or not."""


def loosen(db: sqlite3.Connection) -> None:
    """The responses table rebuilt without column types, as a file someone else made may be:
    then SQLite keeps an integer an integer where this tool's schema would make it text."""
    db.executescript(
        """
        CREATE TABLE loose (key PRIMARY KEY, text, usage, served_model, system_fingerprint,
                            finish_reason, logprob, run_id, model, created) WITHOUT ROWID;
        INSERT INTO loose SELECT * FROM responses;
        DROP TABLE responses;
        ALTER TABLE loose RENAME TO responses;
        """
    )


def plant(path: Path, field: str, value: object, loose: bool = False) -> list[bytes]:
    """Set `field` of some rows to `value` behind the tool's back; the keys of those rows."""
    with sqlite3.connect(path) as db:
        if loose:
            loosen(db)
        keys = [k for (k,) in db.execute("SELECT key FROM responses ORDER BY key LIMIT ?", (2,))]
        assert len(keys) == POISONED
        put = "CAST(? AS TEXT)" if isinstance(value, AsText) else "?"
        for key in keys:
            if field == "reasoning":
                db.execute(f"INSERT OR REPLACE INTO reasoning VALUES (?, {put})", (key, value))
            else:
                db.execute(f"UPDATE responses SET {field} = {put} WHERE key = ?", (value, key))
    return keys


def raw(r: dict) -> object:
    return r["response"].get("raw")


# (field, planted value, loose schema, what of a record would show it)
CASES = [
    pytest.param("text", 999, True, raw, id="text-integer"),
    pytest.param("text", b"an answer", False, raw, id="text-blob"),
    pytest.param("text", BIG, False, raw, id="text-over-the-answer-bound"),
    pytest.param("text", WIDE, False, raw, id="text-over-the-bound-in-bytes"),
    pytest.param("text", 2.5, True, raw, id="text-real"),
    pytest.param("text", AsText(b"\xff\xfe not UTF-8"), False, raw, id="text-not-utf8"),
    pytest.param(
        "usage",
        '{"prompt_tokens": -5, "completion_tokens": 3}',
        False,
        lambda r: r["usage"],
        id="usage-negative",
    ),
    pytest.param(
        "usage",
        '{"prompt_tokens": "5", "completion_tokens": 3}',
        False,
        lambda r: r["usage"],
        id="usage-string-count",
    ),
    pytest.param(
        "usage",
        '{"prompt_tokens": true, "completion_tokens": 3}',
        False,
        lambda r: r["usage"],
        id="usage-boolean",
    ),
    pytest.param(
        "usage",
        '{"prompt_tokens": 1.5, "completion_tokens": 3}',
        False,
        lambda r: r["usage"],
        id="usage-fraction",
    ),
    pytest.param("usage", "[1, 2]", False, lambda r: r["usage"], id="usage-list"),
    pytest.param("usage", 5, True, lambda r: r["usage"], id="usage-integer-column"),
    pytest.param("usage", b"{}", False, lambda r: r["usage"], id="usage-blob"),
    pytest.param(
        "served_model",
        "gpt-evil\x1b]0;owned\x07",
        False,
        lambda r: r["servedModel"],
        id="served-model-control-characters",
    ),
    pytest.param(
        "served_model", "m" * 300, False, lambda r: r["servedModel"], id="served-model-long"
    ),
    pytest.param(
        "served_model", b"blob", False, lambda r: r["servedModel"], id="served-model-blob"
    ),
    pytest.param(
        "served_model", 12345, True, lambda r: r["servedModel"], id="served-model-integer"
    ),
    pytest.param(
        "system_fingerprint",
        "fp_" + "f" * 5000,
        False,
        lambda r: r["systemFingerprint"],
        id="fingerprint-long",
    ),
    pytest.param("finish_reason", "stop\nfake", False, None, id="finish-reason-newline"),
    pytest.param("finish_reason", 7, True, None, id="finish-reason-integer"),
    pytest.param("logprob", "not a number", False, None, id="logprob-text"),
    pytest.param("run_id", "../../elsewhere", False, lambda r: r["cachedFrom"], id="run-id-path"),
    pytest.param(
        "run_id", "c/r1\x1b[2J", False, lambda r: r["cachedFrom"], id="run-id-control-characters"
    ),
    pytest.param("run_id", "c/" + "r" * 1000, False, lambda r: r["cachedFrom"], id="run-id-long"),
    pytest.param("run_id", 42, True, lambda r: r["cachedFrom"], id="run-id-integer"),
    pytest.param(
        "run_id", AsText(b"c/\xc3("), False, lambda r: r["cachedFrom"], id="run-id-not-utf8"
    ),
    pytest.param(
        "reasoning",
        BIG,
        False,
        lambda r: r["response"].get("reasoning"),
        id="reasoning-over-the-answer-bound",
    ),
    pytest.param(
        "reasoning", b"blob", False, lambda r: r["response"].get("reasoning"), id="reasoning-blob"
    ),
]


@pytest.mark.parametrize(("field", "value", "loose", "shows"), CASES)
def test_a_planted_row_is_paid_again_and_said_once(tmp_path, emulator, field, value, loose, shows):
    server = emulator()
    first, _ = run(config(tmp_path, server.base_url("openai"), "r1"))
    assert first.exit_code == 0 and len(server.log.arrivals) == TASKS
    plant(tmp_path / "cache.sqlite", field, value, loose)

    second, printed = run(config(tmp_path, server.base_url("openai"), "r2"))
    assert second.exit_code == 0 and "Traceback" not in printed
    # the planted rows' calls were made (and paid); every other answer came from the cache
    assert len(server.log.arrivals) == TASKS + POISONED
    recs = records(second.run_dir)
    assert len(recs) == TASKS and {r["status"] for r in recs} == {"ok"}
    assert Counter(r["cachedFrom"] for r in recs) == {"c/r1": TASKS - POISONED, None: POISONED}
    assert all(r["costUsd"] > 0 for r in recs if r["cachedFrom"] is None)
    if shows is not None:  # the planted value is nowhere in the results
        assert all(shows(r) != value for r in recs)
    assert all(len(raw(r)) <= MAX_ANSWER_BYTES for r in recs)
    assert (second.run_dir / "results.ndjson").stat().st_size < MAX_ANSWER_BYTES
    # said once for both rows, naming the field, never quoting the value
    assert printed.count("warning:") == 1, printed
    warning = next(line for line in printed.splitlines() if "warning:" in line)
    assert f"`{field}`" in warning
    if isinstance(value, str):
        assert value[:40] not in printed
    if isinstance(value, AsText):
        assert "not UTF-8" not in printed and "\\xff" not in printed
    assert "off after the warning above" not in printed  # the cache stayed on
    assert f"{POISONED} rows it could not trust" in printed


def test_a_refused_row_is_replaced_by_the_answer_paid_for_it(tmp_path, emulator):
    """The call paid again is kept in place of the planted row: the next run pays for nothing
    and warns of nothing."""
    server = emulator()
    run(config(tmp_path, server.base_url("openai"), "r1"))
    keys = plant(tmp_path / "cache.sqlite", "served_model", "m" * 300)
    run(config(tmp_path, server.base_url("openai"), "r2"))
    assert len(server.log.arrivals) == TASKS + POISONED
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        kept = dict(db.execute("SELECT key, run_id FROM responses"))
    assert {kept[k] for k in keys} == {"c/r2"}

    third, printed = run(config(tmp_path, server.base_url("openai"), "r3"))
    assert len(server.log.arrivals) == TASKS + POISONED and "warning:" not in printed
    assert Counter(r["cachedFrom"] for r in records(third.run_dir)) == {
        "c/r1": TASKS - POISONED,
        "c/r2": POISONED,
    }


def test_the_rows_this_tool_writes_pass_its_own_checks(tmp_path, emulator):
    """Usage with null counts, reasoning, a run id of campaign/run: all read back as written."""
    from orchestrator.cache.store import ResponseCache
    from orchestrator.providers.base import Completion

    path = tmp_path / "c.sqlite"
    written = Completion(
        "an answer \u00e9\n",
        usage={"prompt_tokens": 3, "completion_tokens": None, "reasoning_tokens": 0},
        served_model="gpt-4o-2024-08-06",
        system_fingerprint="fp_abc123",
        finish_reason="stop",
        logprob=-1.25,
        reasoning="thought",
    )
    cache = ResponseCache(path, "camp.1/run_2-b", read=True, warn=pytest.fail)
    cache.put(b"k", written, "openai/gpt-4o")
    cache.close()
    again = ResponseCache(path, "camp.1/run_3", read=True, warn=pytest.fail)
    found = again.get(b"k")
    again.close()
    assert found is not None
    assert orjson.dumps(found.usage) == orjson.dumps(written.usage)
    assert (found.text, found.served_model, found.system_fingerprint) == (
        written.text,
        written.served_model,
        written.system_fingerprint,
    )
    assert (found.finish_reason, found.logprob, found.reasoning) == ("stop", -1.25, "thought")
    assert found.cached_from == "camp.1/run_2-b"

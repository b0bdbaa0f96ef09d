"""The batch journal: what a crash leaves is read back as the steps that were taken."""

from __future__ import annotations

import pytest

from orchestrator.batch.journal import JOURNAL, Journal, describe_in_flight
from orchestrator.errors import UserError


def _intent(journal: Journal, name: str, tasks: list[str]):
    path = journal.run_dir / "batches" / f"{name}.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"")
    return journal.intent(name, "mkey", tasks, path)


def test_steps_are_read_back_in_a_new_process(tmp_path):
    journal = Journal(tmp_path)
    a = _intent(journal, "a", ["t1", "t2"])
    journal.uploaded(a, "file-1")
    journal.created(a, "batch_1")
    journal.state(a, "in_progress", {"total": 2, "completed": 1})
    _intent(journal, "b", ["t3"])
    again = Journal(tmp_path)
    a2, b2 = again.batches["a"], again.batches["b"]
    assert (a2.file_id, a2.batch_id, a2.state, a2.counts) == (
        "file-1",
        "batch_1",
        "in_progress",
        {"total": 2, "completed": 1},
    )
    assert a2.input == "batches/a.jsonl" and a2.tasks == ["t1", "t2"]
    assert b2.batch_id is None and b2.state == "submitting"
    assert again.in_flight_tasks() == {"t1", "t2", "t3"}
    again.collected(a2, "completed", 2, 0)
    again.abandoned(b2)
    third = Journal(tmp_path)
    assert third.open_batches() == [] and third.in_flight_tasks() == set()
    assert third.batches["a"].written == 2 and third.batches["b"].state == "abandoned"


def test_an_unchanged_state_is_not_written_again(tmp_path):
    journal = Journal(tmp_path)
    a = _intent(journal, "a", ["t1"])
    journal.created(a, "batch_1")
    for _ in range(3):
        journal.state(a, "in_progress", {"completed": 0})
    assert (tmp_path / JOURNAL).read_bytes().count(b'"event":"state"') == 1


def test_a_torn_last_line_is_a_step_never_taken(tmp_path):
    journal = Journal(tmp_path)
    _intent(journal, "a", ["t1"])
    with open(tmp_path / JOURNAL, "ab") as f:  # kill -9 while the `created` line was written
        f.write(b'{"event":"created","batch":"a","id":"bat')
    again = Journal(tmp_path)
    assert again.batches["a"].batch_id is None  # so the next run asks the provider (find)
    again.created(again.batches["a"], "batch_9")  # the next step cuts the torn line first
    assert Journal(tmp_path).batches["a"].batch_id == "batch_9"
    # a last line whole but for its newline was read, and is kept
    with open(tmp_path / JOURNAL, "ab") as f:
        f.write(
            b'{"event":"state","batch":"a","state":"in_progress","counts":{},"at":"2026-12-01T00:00:00+00:00"}'
        )
    again = Journal(tmp_path)
    assert again.batches["a"].state == "in_progress"
    again.collected(again.batches["a"], "completed", 1, 0)
    assert Journal(tmp_path).batches["a"].closed
    # and a torn intent is a batch never sent
    (tmp_path / JOURNAL).write_bytes(b'{"event":"intent","batch":"z","model":"m","tas')
    assert Journal(tmp_path).batches == {}


def test_a_garbled_line_in_the_middle_is_refused(tmp_path):
    journal = Journal(tmp_path)
    _intent(journal, "a", ["t1"])
    with open(tmp_path / JOURNAL, "ab") as f:
        f.write(b"garbage\n")
    with pytest.raises(UserError) as info:
        Journal(tmp_path)
    assert "line 2" in str(info.value) and info.value.exit_code == 2


def test_status_lines_name_the_batches_in_flight(tmp_path):
    journal = Journal(tmp_path)
    a = _intent(journal, "a", ["t1", "t2"])
    journal.created(a, "batch_1")
    journal.state(a, "in_progress", {"completed": 1, "failed": 0})
    _intent(journal, "b", ["t3"])
    lines = describe_in_flight(tmp_path, {"mkey": "openai/gpt-x"})
    assert len(lines) == 2
    assert lines[0].startswith("batch batch_1 of openai/gpt-x: 2 tasks, in_progress (1 completed)")
    assert "creation not confirmed" in lines[1]
    assert describe_in_flight(tmp_path / "nothing", {}) == []

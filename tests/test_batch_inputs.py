"""Uploaded batch input files (OpenAI keeps each, and every prompt in it, until it is deleted)
are deleted at the provider once their batch is closed, also when a crash, a failed delete or
an abandoned creation came in between: the journal says which are deleted, and the next run
deletes the rest before anything else (issue 32, item 8)."""

from __future__ import annotations

from orchestrator.batch.journal import Journal
from orchestrator.batch.openai import OpenAIBatch
from orchestrator.batch.wire import BatchClient
from orchestrator.providers.errors import Transient
from tests.test_batch_runs import batch_config, run


def _uploaded(server) -> list[str]:
    return [file_id for file_id, _ in server.log.uploads]


def test_an_input_whose_delete_failed_is_deleted_by_the_next_run(tmp_path, emulator, monkeypatch):
    server = emulator()
    cfg = batch_config(tmp_path, server)
    forget = OpenAIBatch.forget_input

    async def failing(self, file_id):
        raise Transient("503 from the server")

    monkeypatch.setattr(OpenAIBatch, "forget_input", failing)
    first = run(cfg)
    assert first.exit_code == 0  # the answers are on disk: a failed delete stops nothing
    assert _uploaded(server) and not server.log.deleted_files
    (left,) = Journal(first.run_dir).leftover_inputs()  # collected, its input not deleted

    monkeypatch.setattr(OpenAIBatch, "forget_input", forget)
    assert run(cfg).exit_code == 0  # nothing left to run, but the input to delete
    assert server.log.deleted_files == [left.file_id] == _uploaded(server)
    assert not Journal(first.run_dir).leftover_inputs()
    assert run(cfg).exit_code == 0 and server.log.deleted_files == [left.file_id]  # once


def test_the_input_of_a_batch_never_created_is_deleted_when_it_is_abandoned(
    tmp_path, emulator, monkeypatch
):
    server = emulator()
    cfg = batch_config(tmp_path, server)
    create_once = BatchClient.create_once

    async def lost(self, create, name, count, known=frozenset()):
        raise Transient("connection reset")  # after the upload: the file is at the provider

    monkeypatch.setattr(BatchClient, "create_once", lost)
    first = run(cfg)
    assert first.exit_code != 0
    (stranded,) = Journal(first.run_dir).open_batches()
    assert stranded.file_id and stranded.batch_id is None

    monkeypatch.setattr(BatchClient, "create_once", create_once)
    assert run(cfg).exit_code == 0  # abandoned (never created), its tasks sent in a new batch
    assert stranded.file_id in server.log.deleted_files
    assert sorted(server.log.deleted_files) == sorted(_uploaded(server))


def test_an_input_already_gone_at_the_provider_counts_as_deleted(tmp_path, emulator, monkeypatch):
    """A crash after the delete, before the journal said so: the next delete gets a 404."""
    server = emulator()
    cfg = batch_config(tmp_path, server)
    forget = OpenAIBatch.forget_input
    gone: list[str] = []

    async def deleted_but_unsaid(self, file_id):
        await forget(self, file_id)
        gone.append(file_id)
        raise Transient("connection reset")  # the answer was lost on the way back

    monkeypatch.setattr(OpenAIBatch, "forget_input", deleted_but_unsaid)
    first = run(cfg)
    assert first.exit_code == 0 and Journal(first.run_dir).leftover_inputs()
    monkeypatch.setattr(OpenAIBatch, "forget_input", forget)
    assert run(cfg).exit_code == 0
    assert not Journal(first.run_dir).leftover_inputs()
    assert server.log.batch_calls[("openai", "delete", 404)] == 1

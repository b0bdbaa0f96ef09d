"""A run folder from someone else is untrusted input (issue 42, docs/security.md "Runs you did not
make"): no verb writes or deletes outside it or through a link it holds, names read from it are
names, its snapshot is used only when sealed by this user's key, and resuming it asks before a
key goes to an endpoint it names. Each case here wrote, deleted or sent on 0.2.0."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace

import orjson
import polars as pl
import pytest
from aiohttp import web

from orchestrator.batch.journal import JOURNAL, Journal
from orchestrator.batch.submit import Submitting
from orchestrator.engine.columnar import FOLDER, META, SCHEMA
from orchestrator.errors import UserError
from tests.conftest import cli, run_quietly, write_config
from tests.test_untrusted_servers import Loopback

MINE = "# the user's own file\n"


@pytest.fixture
def me(tmp_path, monkeypatch) -> Path:
    """This user's seal key lives in a config folder of the test's own."""
    home = tmp_path / "my-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


def _run(tmp_path: Path, jobs: str = '"paired"') -> Path:
    cfg = write_config(
        tmp_path,
        f"""
        name = "c"
        jobs = [{jobs}]
        samples = 1
        items = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        """,
    )
    return run_quietly(cfg).run_dir


def _victim(tmp_path: Path, name: str = "bashrc") -> Path:
    victim = tmp_path / "elsewhere" / name
    victim.parent.mkdir(exist_ok=True)
    victim.write_text(MINE)
    return victim


def _key(run: Path) -> str:
    return orjson.loads((run / "results.ndjson").read_bytes().splitlines()[0])["modelKey"]


# --- 1. exports, analyze and report write through no link ------------------------------------
EXPORTS = {
    "ai-benchmark": lambda key: f"simulated__m__{key}.ndjson",
    "judge-history": lambda key: f"judge-history__{key}.json",
    "instructed-csv": lambda key: "instructed-answers.csv",
    "instructed-parquet": lambda key: "instructed-answers.parquet",
    "parquet": lambda key: "records.parquet",
    "csv": lambda key: "records.csv",
}


@pytest.mark.parametrize("fmt", EXPORTS)
def test_an_export_replaces_a_link_at_its_file_name_and_never_writes_through_it(tmp_path, me, fmt):
    run = _run(tmp_path, '"paired", "judge-history", "instructed"')
    folder = run / "export" / fmt
    folder.mkdir(parents=True)
    victim = _victim(tmp_path)
    planted = [folder / EXPORTS[fmt](_key(run)), folder / "export.toml"]
    if fmt == "parquet":
        planted.append(folder / ".records.parquet.tmp")  # 0.2.0's fixed temporary name
    for link in planted:
        link.symlink_to(victim)
    done = cli("export", str(run), "--format", fmt, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == MINE
    for path in planted[:2]:
        assert not path.is_symlink() and path.stat().st_size > 0
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # 12: one rule for modes


@pytest.mark.parametrize(("verb", "folder"), [("export", "export"), ("report", "report")])
def test_a_linked_output_folder_is_refused_before_anything_is_written(tmp_path, me, verb, folder):
    run = _run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / folder).symlink_to(elsewhere)
    done = cli(verb, str(run), cwd=tmp_path)
    assert done.returncode == 2 and "symbolic link" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and list(elsewhere.iterdir()) == []


def test_analyze_and_report_write_through_no_link(tmp_path, me):
    run = _run(tmp_path)
    victim = _victim(tmp_path)
    names = ["summary.csv", "summary.json", "summary.parquet"]
    for name in names:
        (run / name).symlink_to(victim)
    (run / "report").mkdir()
    (run / "report" / "report.md").symlink_to(victim)
    (run / "report" / "forest.png").symlink_to(victim)
    assert cli("analyze", str(run), cwd=tmp_path).returncode == 0
    assert cli("report", str(run), cwd=tmp_path).returncode == 0
    assert victim.read_text() == MINE
    for path in [*(run / n for n in names), run / "report" / "report.md"]:
        assert path.is_file() and not path.is_symlink()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # 12: as every file the tool writes


# --- 2. a linked snapshot folder is neither written nor emptied ------------------------------
@pytest.mark.parametrize("verb", ["status", "analyze"])
def test_a_linked_snapshot_folder_is_neither_written_nor_emptied(tmp_path, me, verb):
    run = _run(tmp_path)
    table = tmp_path / "elsewhere" / "table"
    table.mkdir(parents=True)
    part = table / "part-0123456789ab.parquet"  # a Spark-style table's part, long written
    part.write_bytes(b"PAR1 someone's data")
    os.utime(part, (time.time() - 3600, time.time() - 3600))
    (run / FOLDER).symlink_to(table)
    done = cli(verb, str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in table.iterdir()) == [part.name]


# --- 3. resuming a batch run deletes nothing the journal names -------------------------------
def _journal_with_input(run: Path, given: str) -> None:
    event = {
        "event": "intent",
        "batch": "b",
        "model": "mkey",
        "count": 1,
        "input": given,
        "tasks": ["t1"],
        "at": "2026-12-01T00:00:00+00:00",
    }
    (run / JOURNAL).write_bytes(orjson.dumps(event) + b"\n")


@pytest.mark.parametrize("given", ["ABSOLUTE", "../elsewhere/bashrc", "batches/../../bashrc"])
def test_a_journal_naming_a_path_deletes_nothing(tmp_path, given):
    victim = _victim(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    _journal_with_input(run, str(victim) if given == "ABSOLUTE" else given)
    with pytest.raises(UserError, match="input"):
        journal = Journal(run)
        journal.abandoned(journal.batches["b"])  # 0.2.0 unlinked run_dir / input here
    assert victim.read_text() == MINE


def test_a_linked_batches_folder_is_never_emptied(tmp_path):
    victim = _victim(tmp_path, "someone.jsonl")
    run = tmp_path / "run"
    run.mkdir()
    (run / "batches").symlink_to(victim.parent)
    submitting = SimpleNamespace(journal=Journal(run), run_dir=run)
    with pytest.raises(UserError, match="symbolic link"):
        Submitting._drop_orphans(submitting, run / "batches")  # type: ignore[arg-type]
    assert victim.read_text() == MINE


# --- 4. resuming a folder made elsewhere asks before a key goes to its endpoint --------------
@pytest.fixture
def endpoint():
    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "no"}}, status=401)

    server = Loopback(refuse)
    yield server
    server.stop()


def _remote_run(tmp_path: Path, url: str, monkeypatch) -> Path:
    """A run of a model at `url` made by another user (their own seal key), stopped at its
    first call (a 401)."""
    cfg = write_config(
        tmp_path,
        f"""
        name = "theirs"
        jobs = ["paired"]
        samples = 1
        items = 1
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "openai"
        name = "m"
        base_url = "{url}"
        api_key_env = "SECRET_KEY_FOR_TEST"
        """,
    )
    monkeypatch.setenv("SECRET_KEY_FOR_TEST", "sk-theirs-0123456789abcdef")
    done = cli("run", str(cfg), cwd=tmp_path)
    assert done.returncode == 1 and (tmp_path / "runs" / "theirs" / "default").is_dir()
    return tmp_path / "runs" / "theirs" / "default"


def test_resuming_a_folder_made_elsewhere_names_the_endpoint_and_sends_no_key(
    tmp_path, monkeypatch, endpoint
):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "their-config"))
    run = _remote_run(tmp_path, endpoint.url, monkeypatch)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "my-config"))  # I received it
    monkeypatch.setenv("SECRET_KEY_FOR_TEST", "sk-mine-0123456789abcdef")
    calls = len(endpoint.seen)
    done = cli("run", str(run), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert endpoint.url in said and "$SECRET_KEY_FOR_TEST" in said
    assert "--trust-endpoints" in said and "sk-mine" not in said
    assert len(endpoint.seen) == calls  # nothing sent

    done = cli("run", str(run), "--trust-endpoints", cwd=tmp_path)
    assert done.returncode == 1 and len(endpoint.seen) > calls  # asked for: sent
    assert endpoint.seen[-1]["Authorization"] == "Bearer sk-mine-0123456789abcdef"
    calls = len(endpoint.seen)
    assert cli("run", str(run), cwd=tmp_path).returncode == 1  # trusted once: mine now
    assert len(endpoint.seen) > calls


def test_the_python_api_resumes_a_received_folder_only_when_trusted(
    tmp_path, monkeypatch, endpoint
):
    """orchestrator.run(RUN_DIR) checks a received folder as `run` does, with nobody to ask:
    refused (naming the host and trust_endpoints=True) and nothing sent, unless trusted."""
    import orchestrator

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "their-config"))
    run = _remote_run(tmp_path, endpoint.url, monkeypatch)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "my-config"))  # I received it
    monkeypatch.setenv("SECRET_KEY_FOR_TEST", "sk-mine-0123456789abcdef")
    calls = len(endpoint.seen)
    with pytest.raises(orchestrator.UserError) as refused:
        orchestrator.run(run, progress=False)
    said = " ".join(str(refused.value).split())
    assert endpoint.url in said and "$SECRET_KEY_FOR_TEST" in said
    assert "trust_endpoints=True" in said and "sk-mine" not in said
    assert len(endpoint.seen) == calls  # nothing sent
    orchestrator.run(run, trust_endpoints=True, progress=False)
    assert len(endpoint.seen) > calls
    assert endpoint.seen[-1]["Authorization"] == "Bearer sk-mine-0123456789abcdef"


def _model(**fields):
    from orchestrator.spec.campaign import ModelConfig

    return ModelConfig(name="m", **fields)


@pytest.mark.parametrize(
    ("fields", "official"),
    [
        (
            {
                "provider": "openai",
                "base_url": "https://api.openai.com/v1",
                "api_key_env": "OPENAI_API_KEY",
            },
            True,
        ),
        ({"provider": "anthropic", "api_key_env": "ANTHROPIC_API_KEY"}, True),  # its default URL
        (
            {
                "preset": "groq",
                "provider": "openai",
                "base_url": "https://api.groq.com/openai/v1",
                "api_key_env": "GROQ_API_KEY",
            },
            True,
        ),
        # another service's host, or another service's key: not the provider's own
        (
            {
                "provider": "openai",
                "base_url": "https://api.groq.com/openai/v1",
                "api_key_env": "OPENAI_API_KEY",
            },
            False,
        ),
        (
            {
                "preset": "groq",
                "provider": "openai",
                "base_url": "https://api.groq.com/openai/v1",
                "api_key_env": "OPENAI_API_KEY",
            },
            False,
        ),
        (
            {
                "provider": "openai",
                "base_url": "http://api.openai.com/v1",
                "api_key_env": "OPENAI_API_KEY",
            },
            False,
        ),
        (
            {
                "provider": "openai",
                "base_url": "http://127.0.0.1:8000/v1",
                "api_key_env": "OPENAI_API_KEY",
            },
            False,
        ),
        (
            {
                "provider": "openai",
                "base_url": "https://api.openai.com/v1",
                "headers_env": {"X-Org": "ORG"},
            },
            False,
        ),
    ],
)
def test_a_provider_s_own_host_is_the_one_of_its_own_service_and_key(fields, official):
    from orchestrator.engine.endpoints import _official, _urls

    model = _model(**fields)
    assert [_official(model, url) for url in _urls(model)] == [official]


def test_every_url_a_campaign_sends_keys_to_is_named(tmp_path):
    from orchestrator.engine.endpoints import endpoints
    from orchestrator.session import load_campaign

    cfg = write_config(
        tmp_path,
        """
        name = "c"
        jobs = ["paired"]
        [[models]]
        provider = "openai"
        name = "pool"
        base_urls = ["http://10.0.0.1/v1", "http://10.0.0.2/v1"]
        api_key_env = "POOL_KEY"
        headers_env = {"X-Team" = "TEAM_HEADER"}
        [[models]]
        provider = "local"
        [models.server]
        backend = "ray"
        address = "head.example:6379"
        [extractor]
        provider = "openai"
        name = "x"
        base_url = "https://extract.example/v1"
        api_key_env = "EXTRACT_KEY"
        """,
    )
    found = {(e.url, e.secrets, e.official) for e in endpoints(load_campaign(cfg))}
    assert found == {
        ("http://10.0.0.1/v1", ("POOL_KEY", "TEAM_HEADER"), False),
        ("http://10.0.0.2/v1", ("POOL_KEY", "TEAM_HEADER"), False),
        ("ray://head.example:6379", ("RAY_AUTH_TOKEN",), False),
        ("https://extract.example/v1", ("EXTRACT_KEY",), False),
    }


def test_resuming_my_own_folder_asks_nothing(tmp_path, monkeypatch, me, endpoint):
    run = _remote_run(tmp_path, endpoint.url, monkeypatch)
    calls = len(endpoint.seen)
    done = cli("run", str(run), cwd=tmp_path)
    assert done.returncode == 1 and len(endpoint.seen) > calls, done.stderr
    assert f"calls openai/m: {endpoint.url}" in " ".join(done.stderr.split())


def test_an_edited_manifest_is_no_longer_mine(tmp_path, monkeypatch, me, endpoint):
    run = _remote_run(tmp_path, endpoint.url, monkeypatch)
    manifest = run / "manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"samples": 1', b'"samples":  1'))
    calls = len(endpoint.seen)
    assert cli("run", str(run), cwd=tmp_path).returncode == 2
    assert len(endpoint.seen) == calls


def test_a_received_folder_does_not_choose_the_cache_file_it_writes(tmp_path, monkeypatch):
    shared = tmp_path / "elsewhere" / "their-cache.sqlite"
    shared.parent.mkdir()
    cfg = write_config(
        tmp_path,
        f"""
        name = "theirs"
        jobs = ["paired"]
        samples = 1
        items = 1
        cache = "{shared}"
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "m"
        """,
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "their-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "their-cache-home"))
    run = tmp_path / "runs" / "theirs" / "default"
    assert cli("run", str(cfg), cwd=tmp_path).returncode == 0 and shared.exists()
    shared.unlink()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "my-config"))  # I received it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "my-cache-home"))
    done = cli("run", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "not used" in done.stderr and not shared.exists()


# --- 5. a record's modelKey is a name, never a path ------------------------------------------
@pytest.mark.parametrize("fmt", ["ai-benchmark", "judge-history"])
def test_a_model_key_that_is_a_path_is_refused_and_nothing_is_written(tmp_path, me, fmt):
    run = _run(tmp_path, '"paired", "judge-history"')
    log = run / "results.ndjson"
    key = _key(run)
    log.write_bytes(log.read_bytes().replace(key.encode(), b"k/../../../../victim/escaped"))
    done = cli("export", str(run), "--format", fmt, cwd=tmp_path)
    assert done.returncode == 2 and "modelKey" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "victim").exists() and not (run / "export" / fmt).exists()


# --- 7. a snapshot is used only when it is provably this run's -------------------------------
def _status(run: Path, tmp_path: Path) -> dict:
    done = cli("status", str(run), "--json", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return orjson.loads(done.stdout)["models"][0]


def _tamper(run: Path, change) -> None:
    meta_path = run / FOLDER / META
    meta = orjson.loads(meta_path.read_bytes())
    change(meta, run / FOLDER)
    meta_path.write_bytes(orjson.dumps(meta))


def _part(meta: dict, folder: Path) -> Path:
    first = meta["parts"][0]
    return folder / (first["name"] if isinstance(first, dict) else first)


def _edit_rows(meta, folder):
    part = _part(meta, folder)
    df = pl.read_parquet(part).with_columns(status=pl.lit("failed"))
    df.write_parquet(part)  # the same names and meta: only the rows are another's


def _another_runs_part(meta, folder):
    other = folder.parent.parent / "other" / FOLDER / "part-0123456789ab.parquet"
    other.parent.mkdir(parents=True)
    rows = pl.read_parquet(_part(meta, folder)).with_columns(status=pl.lit("refused"))
    rows.write_parquet(other)
    entry = meta["parts"][0]
    name = f"../../other/{FOLDER}/{other.name}"
    meta["parts"][0] = {**entry, "name": name} if isinstance(entry, dict) else name


def _ten_million_rows(meta, folder):
    schema = {**SCHEMA, "offset": pl.UInt64()}
    big = pl.select(pl.repeat("x", 10_000_000, dtype=pl.String).alias("taskId")).with_columns(
        pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c != "taskId"
    )
    big.write_parquet(_part(meta, folder), compression="zstd")


def _bad_offset(meta, folder):
    from orchestrator.engine.prefix import prefix_hash

    meta["offset"] = -5  # with the hash of what 0.2.0 hashed for it: the meta looked current
    meta["hash"] = prefix_hash(folder.parent / "results.ndjson", -5).hexdigest()


def _bad_lines(meta, folder):
    meta["lines"] = "x"


def _other_schema(meta, folder):
    pl.DataFrame({"taskId": ["a"], "status": [1]}).write_parquet(_part(meta, folder))


TAMPERING = [
    _edit_rows,
    _another_runs_part,
    _ten_million_rows,
    _bad_offset,
    _bad_lines,
    _other_schema,
]


@pytest.mark.parametrize("appended", [False, True], ids=["as-is", "appended"])
@pytest.mark.parametrize("tamper", TAMPERING, ids=lambda f: f.__name__.strip("_"))
def test_a_tampered_snapshot_is_rebuilt_from_the_log(tmp_path, me, tamper, appended):
    run = _run(tmp_path)
    assert _status(run, tmp_path)["ok"] > 0  # the first read writes the snapshot
    _tamper(run, tamper)
    log = run / "results.ndjson"
    if appended:  # a resume appended since: the snapshot's lines are read with the new ones
        with open(log, "ab") as f:
            f.write(log.read_bytes().splitlines(keepends=True)[0])
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("manifest.json", "results.ndjson"):
        (copy / name).write_bytes((run / name).read_bytes())
    truth = _status(copy, tmp_path)  # read from the log alone
    assert _status(run, tmp_path) == truth
    assert cli("analyze", str(run), cwd=tmp_path).returncode == 0


def test_a_snapshot_sealed_by_another_user_is_rebuilt(tmp_path, monkeypatch, me):
    run = _run(tmp_path)
    truth = _status(run, tmp_path)
    _tamper(run, _edit_rows)  # edited by someone who then sealed it with their own key
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "their-config"))
    meta = orjson.loads((run / FOLDER / META).read_bytes())
    from orchestrator.engine import columnar
    from orchestrator.engine.seal import file_digest

    part = meta["parts"][0]
    part["sha256"] = file_digest(run / FOLDER / part["name"], 1 << 30)
    meta["seal"] = columnar.seal(columnar._sealed_bytes(meta))
    (run / FOLDER / META).write_bytes(orjson.dumps(meta))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(me))
    assert _status(run, tmp_path) == truth


def test_my_own_snapshot_is_still_used(tmp_path, me, monkeypatch):
    from orchestrator.engine import columnar

    run = _run(tmp_path)
    truth = _status(run, tmp_path)
    parsed = []
    monkeypatch.setattr(columnar, "_parse", lambda p: parsed.append(p))  # no full parse now
    assert _status(run, tmp_path) == truth and not parsed


def test_the_seal_key_is_private_and_made_once(tmp_path, me):
    from orchestrator.engine.seal import key_path, user_key

    assert user_key() == user_key() and len(user_key() or b"") == 32
    assert key_path().is_relative_to(me)
    assert stat.S_IMODE(key_path().stat().st_mode) == 0o600


# --- the reviewers' further cases: every other writer and reader of a received folder -------
def test_compare_writes_into_no_linked_folder_of_a_received_campaign(tmp_path, me):
    from tests.test_compare import _config, _nights

    nights = _nights(tmp_path, _config(tmp_path), "n1", "n2")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (nights / "compare").symlink_to(elsewhere)
    done = cli("compare", str(nights / "n1"), str(nights / "n2"), cwd=tmp_path)
    assert done.returncode == 2 and "symbolic link" in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_manifest_run_id_that_is_a_path_names_no_comparison_file(tmp_path, me):
    from tests.test_compare import _config, _nights

    nights = _nights(tmp_path, _config(tmp_path), "n1", "n2")
    manifest = nights / "n2" / "manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"runId": "n2"', b'"runId": "../../x"'))
    done = cli("compare", str(nights / "n1"), str(nights / "n2"), cwd=tmp_path)
    assert done.returncode == 2 and "runId" in done.stderr, done.stderr
    assert not (nights / "compare").exists() or list((nights / "compare").iterdir()) == []


def test_an_audit_review_never_writes_through_a_linked_reviews_file(tmp_path):
    from orchestrator.studies.trace_audit.review import REVIEWS, _append, read_reviews

    victim = _victim(tmp_path, ".bash_profile")
    audit = tmp_path / "audit"
    audit.mkdir()
    (audit / REVIEWS).symlink_to(victim)
    with pytest.raises(UserError, match="not a file"):
        read_reviews(audit / REVIEWS)
    with pytest.raises(OSError):
        _append(audit / REVIEWS, {"taskId": "$(touch pwned)"})
    assert victim.read_text() == MINE


def test_a_snapshot_meta_that_is_a_fifo_is_no_hang(tmp_path, me):
    run = _run(tmp_path)
    truth = _status(run, tmp_path)
    (run / FOLDER / META).unlink()
    os.mkfifo(run / FOLDER / META)  # opening it to read would wait for a writer forever
    assert _status(run, tmp_path) == truth


def test_the_viewer_of_a_received_run_writes_no_snapshot_through_a_link(tmp_path, me):
    from orchestrator.viewer.data import RunData

    run = _run(tmp_path)
    table = tmp_path / "elsewhere"
    table.mkdir()
    (run / FOLDER).symlink_to(table)
    frame = RunData.open(run).loaded().frame
    assert frame.height == len((run / "results.ndjson").read_bytes().splitlines())
    assert list(table.iterdir()) == []


@pytest.mark.parametrize(
    ("event", "value"),
    [("created", "../../v1/files/file-x"), ("uploaded", "file-1?purpose=x"), ("created", 7)],
)
def test_a_journal_s_provider_ids_are_ids_never_paths(tmp_path, event, value):
    run = tmp_path / "run"
    run.mkdir()
    _journal_with_input(run, "batches/bo-1.jsonl")
    field = "id" if event == "created" else "file"
    with open(run / JOURNAL, "ab") as f:
        f.write(orjson.dumps({"event": event, "batch": "b", field: value, "at": "x"}) + b"\n")
    with pytest.raises(UserError, match=field):
        Journal(run)

"""The documentation: a short README, links that lead somewhere, a described config, a CLI
reference with every command, generated files in sync, and JSON Schemas that the files they
describe pass. The site itself is built in CI (`mkdocs build --strict`), not here."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs" / "schemas"
README_LIMIT = 10_000  # bytes; reference material goes to docs/


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _hooks()


def _markdown_files() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "orchestrator" / "studies").glob("*/*.md")),
    ]


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def relative_links(path: Path) -> list[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))  # code blocks hold no links
    return [
        target
        for target in _LINK.findall(text)
        if not re.match(r"^[a-z]+:", target) and not target.startswith("#")
    ]


def test_readme_is_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size < README_LIMIT, f"README.md is {size} bytes: move reference material to docs/"


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    missing = [
        target
        for target in relative_links(path)
        if not (path.parent / target.split("#", 1)[0]).exists()
    ]
    assert not missing, f"{path.relative_to(ROOT)} links to files that do not exist: {missing}"


_PATH = re.compile(r"`((?:orchestrator|tests|configs|jobs|docs)/[A-Za-z0-9_./-]+)`")
EXAMPLES = {"orchestrator/studies/my_study/__init__.py"}  # named to be written, not read


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_files_the_docs_name_exist(path: Path) -> None:
    """A path in code (`orchestrator/engine/store.py`) names a file of the repository: a file
    moved or renamed is caught here, not by a reader."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    named = {p.rstrip(".") for p in _PATH.findall(text)} - EXAMPLES
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{path.relative_to(ROOT)} names files that do not exist: {missing}"


def test_the_readme_links_into_the_docs() -> None:
    targets = relative_links(ROOT / "README.md")
    for page in ("docs/getting-started.md", "docs/config-reference.md", "docs/cli.md"):
        assert page in targets


def test_the_readme_names_every_command() -> None:
    import typer.main

    from orchestrator.cli import app

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in typer.main.get_command(app).commands:  # type: ignore[attr-defined]
        assert f"| `{name}" in readme, f"README.md's command table lacks {name}"


def test_every_config_field_has_a_description() -> None:
    sections = hooks.config_sections()
    assert {m.__name__ for _, m, _ in sections} >= {
        "CampaignConfig",
        "ModelConfig",
        "LimitConfig",
        "LocalServerConfig",
    }
    missing = hooks.undocumented_fields()
    assert not missing, "fields without Field(description=...): " + ", ".join(missing)


def test_the_config_reference_has_every_section_and_field() -> None:
    text = hooks.config_reference()
    for path, model, _ in hooks.config_sections():
        if path:
            assert f"## `{hooks._heading(path)}`" in text
        for name in model.model_fields:
            assert f"| `{name}` |" in text


def test_the_cli_reference_lists_every_command() -> None:
    """Every command the Typer app registers (its groups' too) has its section, with every
    option it takes."""
    import typer.main

    from orchestrator.cli import app

    def names(typer_app, prefix: str) -> set[str]:
        out = set()
        for info in typer_app.registered_commands:
            out.add(f"{prefix} {info.name or typer.main.get_command_name(info.callback.__name__)}")
        for group in typer_app.registered_groups:
            name = f"{prefix} {group.name}"
            out |= {name} | names(group.typer_instance, name)
        return out

    wanted = names(app, "orchestrator")
    assert {"orchestrator run", "orchestrator cache prune", "orchestrator audit-gate"} <= wanted
    text = hooks.cli_reference()
    listed = set(re.findall(r"^#+ `(orchestrator[^`]*)`$", text, re.M))
    assert wanted <= listed, f"missing from the CLI reference: {sorted(wanted - listed)}"
    for path, command, ctx in hooks.cli_commands():
        for param in command.get_params(ctx):
            for opt in param.opts if param.param_type_name == "option" else ():
                if opt == "--help":
                    continue
                assert f"`{opt}" in text, f"{path}: {opt} is missing"


def test_generated_files_are_in_sync() -> None:
    """The study READMEs' deviation lists, and the generated schemas (compared by what they say
    of each field, so that another pydantic release's layout does not matter)."""
    stale = [p for p in hooks.out_of_sync() if p.suffix == ".md"]
    assert not stale, f"run python docs/hooks.py --write: {stale} are out of date"

    def essence(schema: dict) -> dict:
        models = {"": schema, **schema.get("$defs", {})}
        return {
            name: {
                field: (spec.get("description"), name and field in model.get("required", []))
                for field, spec in model.get("properties", {}).items()
            }
            for name, model in models.items()
        }

    for path, text in hooks.generated_schemas().items():
        assert path.is_file(), f"run python docs/hooks.py --write: {path} is missing"
        assert essence(json.loads(path.read_text())) == essence(json.loads(text)), (
            f"run python docs/hooks.py --write: {path.name} is out of date"
        )


def test_every_study_has_a_readme_page() -> None:
    from orchestrator.studies import registered

    folders = {type(s).__module__.split(".")[2] for s in registered()}
    for folder in folders:
        source = f"orchestrator/studies/{folder}/README.md"
        assert source in hooks.COPIED, f"{source}: add it to COPIED in docs/hooks.py"
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in hooks.COPIED.values():
        assert page in nav, f"{page} is not in mkdocs.yml's nav"


def test_links_of_copied_pages_are_rewritten_for_the_site() -> None:
    source = "orchestrator/studies/instructed/README.md"
    page = hooks.COPIED[source]
    text = "[a](../../../docs/jobs.md#scoring) [b](../trace_audit/README.md) [c](../../../configs/x.toml)"
    assert (
        hooks.rewrite_links(text, source, page) == "[a](../jobs.md#scoring) [b](trace-audit.md) c"
    )


# --- the schemas against the files they describe -----------------------------------------------

GENERATING = """
name = "schemas"
jobs = ["paired"]
samples = 2
output_dir = "{out}"
[[models]]
provider = "simulated"
name = "sim"
temperature = 1.0
[models.simulate]
parse_error_rate = 0.2
refusal_rate = 0.1
"""

SCORING = """
name = "scored"
jobs = ["instructed"]
items = 1
output_dir = "{out}"
[[models]]
provider = "simulated"
name = "sim-scored"
answers = "score"
"""


def _validator(name: str):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    resources = [
        (p.name, Resource.from_contents(json.loads(p.read_text())))
        for p in SCHEMAS.glob("*.schema.json")
    ]
    registry = Registry().with_resources(resources)
    schema = json.loads((SCHEMAS / name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry)


@pytest.mark.parametrize("body", [GENERATING, SCORING], ids=["generate", "score"])
def test_a_run_matches_its_schemas(tmp_path: Path, body: str) -> None:
    from typer.testing import CliRunner

    from orchestrator.cli import app
    from tests.conftest import run_quietly, write_config

    config = write_config(tmp_path, body.format(out=tmp_path / "runs"))
    planned = CliRunner().invoke(app, ["plan", str(config), "--json"])
    assert planned.exit_code == 0, planned.output
    _validator("plan.schema.json").validate(json.loads(planned.stdout))

    outcome = run_quietly(config)
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    for job in manifest["jobs"].values():  # a generated job's thousands of items, cut to a few
        for experiment in job["experiments"]:
            for condition in experiment["conditions"]:
                del condition["variants"][3:]
    _validator("manifest.schema.json").validate(manifest)
    records = _validator("results-record.schema.json")
    lines = (outcome.run_dir / "results.ndjson").read_text().splitlines()
    assert lines
    statuses = set()
    for line in lines:
        record = json.loads(line)
        records.validate(record)
        statuses.add(record["status"])
    if body is GENERATING:
        assert {"ok", "parse_error", "refused"} <= statuses

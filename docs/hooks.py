"""The docs site's generated parts, as an mkdocs hook (mkdocs.yml `hooks:`), and the files they
keep in sync in the repository.

Built into the site on every `mkdocs build`:

- the home page, from README.md;
- the configuration reference, from the pydantic models of the campaign config (each field's
  type, default, constraints and `Field(description=...)`);
- the CLI reference, from the Typer app (`orchestrator.cli.app`) as click sees it;
- one page per study, from `orchestrator/studies/<study>/README.md` (and the audit's golden set).

Kept in the repository, checked by tests/test_docs.py, rewritten by
`python docs/hooks.py --write`:

- `docs/schemas/campaign-config.schema.json` and `docs/schemas/job.schema.json`, generated from
  the pydantic models (the manifest's `config` and `jobs` are dumps of them);
- the deviations list in each study's README, generated from its `deviations.py`.

Links in the pages copied from elsewhere in the repository are rewritten for the site: a link to
a docs page or another copied page points at its page, one to any other file of the repository
keeps its text and loses the link (the site serves no source files).
"""

from __future__ import annotations

import inspect
import json
import posixpath
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCHEMAS = DOCS / "schemas"
STUDIES = ROOT / "orchestrator" / "studies"

# Repository files copied into the site: repository path -> the page's path in the site.
COPIED = {
    "README.md": "index.md",
    "orchestrator/studies/paired/README.md": "studies/paired.md",
    "orchestrator/studies/judge_history/README.md": "studies/judge-history.md",
    "orchestrator/studies/bias_strength/README.md": "studies/bias-strength.md",
    "orchestrator/studies/instructed/README.md": "studies/instructed.md",
    "orchestrator/studies/trace_audit/README.md": "studies/trace-audit.md",
    "orchestrator/studies/trace_audit/GOLDEN.md": "studies/trace-audit-golden.md",
    "CHANGELOG.md": "changelog.md",
}
SOURCE = {page: source for source, page in COPIED.items()}
# Pages of docs/ whose block between these markers the generated text replaces in the site.
GENERATED = re.compile(r"<!-- begin generated: ([a-z ]+) -->\n.*?<!-- end generated -->", re.S)
MAKERS = {"config reference": lambda: config_reference(), "cli reference": lambda: cli_reference()}

# ---------------------------------------------------------------------------------------------
# Markdown helpers

_CODE = re.compile(r"(`+)(.+?)\1", re.S)


def escape(text: str) -> str:
    """Text for a Markdown table cell or paragraph: markup characters outside code spans are
    escaped (`runs/<campaign>` would otherwise be an HTML tag), code spans are kept."""
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(_escape_plain(text[last : m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_escape_plain(text[last:]))
    return "".join(out).replace("\n", " ")


def _escape_plain(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\*_\[\]|#])", r"\\\1", text)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# ---------------------------------------------------------------------------------------------
# The configuration reference, from the pydantic models


def config_sections() -> list[tuple[str, type, list[str]]]:
    """(TOML path, model, other paths it is found at) of every model the campaign config holds,
    the config itself first, each model once, in the order a reader meets them."""
    from pydantic import BaseModel

    from orchestrator.spec.campaign import CampaignConfig

    seen: dict[type, tuple[str, list[str]]] = {}
    order: list[type] = []

    def visit(model: type, path: str) -> None:
        if model in seen:
            seen[model][1].append(path)
            return
        seen[model] = (path, [])
        order.append(model)
        for name, field in model.model_fields.items():
            for sub, suffix in _nested(field.annotation, BaseModel):
                visit(sub, _join(path, name, suffix))

    visit(CampaignConfig, "")
    return [(seen[m][0], m, seen[m][1]) for m in order]


def _join(path: str, name: str, suffix: str) -> str:
    """`models[]` + `server` -> `models[].server` (`[]`: an array of tables)."""
    return f"{path}.{name}{suffix}".lstrip(".")


def _nested(annotation: Any, base: type) -> list[tuple[type, str]]:
    """The models inside a field's type, each with how its TOML path goes on: `[]` for a list
    of tables, `.KEY` for a table of them."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, base):
        return [(annotation, "")]
    if origin in (typing.Union, types.UnionType):
        return [found for a in args for found in _nested(a, base)]
    if origin in (list, tuple):
        return [(m, s + "[]") for a in args for m, s in _nested(a, base)]
    if origin is dict:
        return [(m, ".KEY" + s) for m, s in _nested(args[1], base)]
    return []


def _heading(path: str) -> str:
    name = path.replace("[]", "")
    return f"[[{name}]]" if path.endswith("[]") else f"[{name}]"


def type_name(annotation: Any, tables: dict[type, str] | None = None) -> str:
    """A field's type in TOML's words; a model is named by its section (`tables`)."""
    from pydantic import BaseModel

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "none"
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a, tables) for a in args if a is not type(None)]
        return " or ".join(names)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin in (list, tuple):
        return "array of " + type_name(args[0], tables).replace("table, see", "tables, see")
    if origin is dict:
        return "table of " + type_name(args[1], tables).replace("table, see", "tables, see")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        where = (tables or {}).get(annotation)
        return f"table, see `{where}`" if where else f"table ({annotation.__name__})"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def constraints(field: Any) -> list[str]:
    out = []
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    for item in field.metadata:
        for attr, word in words.items():
            if getattr(item, attr, None) is not None:
                out.append(f"{word} {getattr(item, attr)}")
        if getattr(item, "min_length", None) is not None:
            out.append(f"at least {item.min_length} long")
        if getattr(item, "pattern", None):
            out.append(f"matches `{item.pattern}`")
        if getattr(item, "allow_inf_nan", None) is False:
            out.append("finite")
    return out


def default_text(field: Any) -> str:
    from pydantic import BaseModel

    if field.is_required():
        return "**required**"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "its defaults"
    if isinstance(value, tuple):
        value = [v.model_dump() if isinstance(v, BaseModel) else v for v in value]
    return f"`{json.dumps(value)}`"


def config_reference() -> str:
    lines: list[str] = []
    sections = config_sections()
    tables = {model: _heading(path) for path, model, _ in sections if path}
    for path, model, also in sections:
        lines += [f"## `{_heading(path)}`" if path else "## The top level", ""]
        doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")
        if doc:
            lines += [escape(doc), ""]
        if also:
            where = ", ".join(f"`{_heading(p)}`" for p in also)
            lines += [f"The same table is also read at {where}.", ""]
        lines += ["| field | type | default | description |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            kind = ", ".join([type_name(field.annotation, tables), *constraints(field)])
            lines.append(
                f"| `{name}` | {_cell(kind)} | {_cell(default_text(field))} | "
                f"{escape(field.description or '')} |"
            )
        lines.append("")
    return "\n".join(lines)


def undocumented_fields() -> list[str]:
    """`Model.field` of every config field without a description."""
    return [
        f"{model.__module__}.{model.__name__}.{name}"
        for _, model, _ in config_sections()
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]


# ---------------------------------------------------------------------------------------------
# The CLI reference, from the Typer app


def cli_commands() -> list[tuple[str, Any, Any]]:
    """(full name, click command, click context) of every command, groups' commands included."""
    import typer.main

    from orchestrator.cli import app

    # Typer's click may be its own copy (typer._click): its classes are used through the
    # objects, never imported.
    root = typer.main.get_command(app)
    out: list[tuple[str, Any, Any]] = []

    def walk(command: Any, name: str, parent: Any) -> None:
        ctx = command.context_class(command, info_name=name, parent=parent)
        out.append((ctx.command_path, command, ctx))
        if hasattr(command, "list_commands"):
            for sub in command.list_commands(ctx):
                child = command.get_command(ctx, sub)
                if child is not None and not child.hidden:
                    walk(child, sub, ctx)

    walk(root, "orchestrator", None)
    return out


def _param_row(param: Any, ctx: Any) -> str:
    """A row of what `COMMAND --help` says of one argument or option."""
    names, text = param.get_help_record(ctx) or (param.name, "")
    if param.param_type_name == "argument":
        names = f"{param.name.upper()}{names[len(param.name) :]}"
    return f"| `{names}` | {escape(text)} |"


def _usage(path: str, params: list[Any]) -> str:
    words = [path]
    if any(p.param_type_name == "option" for p in params):
        words.append("[OPTIONS]")
    for p in params:
        if p.param_type_name == "argument":
            word = p.name.upper() + ("..." if p.nargs == -1 else "")
            words.append(word if p.required else f"[{word}]")
    return " ".join(words)


def cli_reference() -> str:
    lines: list[str] = []
    for path, command, ctx in cli_commands():
        level = "#" * min(2 + path.count(" "), 4)
        lines += [f"{level} `{path}`", ""]
        params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
        params = [p for p in params if "--help" not in p.opts]
        usage = _usage(path, params)
        if hasattr(command, "list_commands"):
            usage += " COMMAND [ARGS]..."
        lines += ["```", usage, "```", ""]
        if command.help:
            for para in inspect.cleandoc(command.help).split("\n\n"):
                if para.startswith("\b"):  # click's mark of a paragraph kept as written
                    lines += ["```text", para[1:].strip("\n"), "```", ""]
                else:
                    lines += [escape(para.strip()), ""]
        if params:
            lines += ["| argument / option | description |", "|---|---|"]
            lines += [_param_row(p, ctx) for p in params]
            lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Study READMEs: the deviations block, generated from each study's deviations.py

BEGIN = "<!-- begin deviations: generated from deviations.py by `python docs/hooks.py --write` -->"
END = "<!-- end deviations -->"


def deviations_by_folder() -> dict[str, list[Any]]:
    from orchestrator.studies import registered

    out = {}
    for study in registered():
        module = type(study).__module__
        if module.startswith("orchestrator.studies.") and study.deviations:
            out[module.split(".")[2]] = list(study.deviations)
    return out


def with_deviations(text: str, deviations: list[Any]) -> str:
    if BEGIN not in text:
        return text
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    items = [f"- **{escape(d.what)}** {escape(d.why)}" for d in deviations]
    return "\n".join([head + BEGIN, *items, END]) + tail


def synced_readmes() -> dict[Path, str]:
    """Each study README as it should read, with its deviations block regenerated."""
    out = {}
    for folder, deviations in deviations_by_folder().items():
        path = STUDIES / folder / "README.md"
        if path.is_file():
            out[path] = with_deviations(path.read_text(), deviations)
    return out


# ---------------------------------------------------------------------------------------------
# JSON Schemas generated from the models


def generated_schemas() -> dict[Path, str]:
    from orchestrator.spec.campaign import CampaignConfig
    from orchestrator.spec.models import Job

    out = {}
    for name, model, title in (
        ("campaign-config", CampaignConfig, "A campaign config (TOML), as the manifest keeps it"),
        ("job", Job, "A job in the general job model, as the manifest keeps it"),
    ):
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": "Generated from the pydantic models by `python docs/hooks.py --write`.",
            **model.model_json_schema(mode="serialization"),
            "title": title,
        }
        out[SCHEMAS / f"{name}.schema.json"] = json.dumps(schema, indent=2) + "\n"
    return out


def generated_pages() -> dict[Path, str]:
    """docs/cli.md and docs/config-reference.md with their generated blocks filled, so the pages
    read whole in the repository too (the site regenerates the same blocks when built)."""
    out = {}
    for name in ("cli.md", "config-reference.md"):
        path = ROOT / "docs" / name
        text = path.read_text()
        out[path] = GENERATED.sub(
            lambda m: (
                f"<!-- begin generated: {m.group(1)} -->\n{MAKERS[m.group(1)]().rstrip()}"
                "\n<!-- end generated -->"
            ),
            text,
        )
    return out


def _wanted() -> dict[Path, str]:
    return {**generated_schemas(), **synced_readmes(), **generated_pages()}


def out_of_sync() -> list[Path]:
    """The repository files whose generated content is stale."""
    return [p for p, text in _wanted().items() if not p.is_file() or p.read_text() != text]


def write() -> list[Path]:
    stale = out_of_sync()
    for path, text in _wanted().items():
        if path in stale:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return stale


# ---------------------------------------------------------------------------------------------
# Links of copied pages

_LINK = re.compile(r"(!?\[[^\]]*\])\(([^)\s]+)\)")


def site_link(target: str, source: str, page: str) -> str | None:
    """Where a relative link of the repository file `source` points from the site page `page`;
    None when it names a file the site does not have."""
    path, _, anchor = target.partition("#")
    if not path:
        return target
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
    if repo_path in COPIED:
        dest = COPIED[repo_path]
    elif repo_path.startswith("docs/") and (ROOT / repo_path).exists():
        dest = repo_path[len("docs/") :]
    else:
        return None
    rel = posixpath.relpath(dest, posixpath.dirname(page) or ".")
    return rel + (f"#{anchor}" if anchor else "")


def rewrite_links(text: str, source: str, page: str) -> str:
    def one(m: re.Match[str]) -> str:
        label, target = m.group(1), m.group(2)
        if re.match(r"^[a-z]+:", target) or target.startswith("/"):
            return m.group(0)
        new = site_link(target, source, page)
        return f"{label}({new})" if new is not None else label[1:-1]

    return _LINK.sub(one, text)


def copied_page(source: str) -> str:
    """A repository file as its site page: a study README with its deviations block filled."""
    text = (ROOT / source).read_text()
    folder = source.split("/")[2] if source.startswith("orchestrator/studies/") else ""
    return with_deviations(text, deviations_by_folder().get(folder, []))


# ---------------------------------------------------------------------------------------------
# The mkdocs hook


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for source, page in COPIED.items():
        files.append(File.generated(config, page, content=copied_page(source)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = GENERATED.sub(lambda m: MAKERS[m.group(1)](), markdown)
    uri = page.file.src_uri
    return rewrite_links(markdown, SOURCE.get(uri, f"docs/{uri}"), uri)


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        for path in write():
            print(f"rewritten: {path.relative_to(ROOT)}")
    elif sys.argv[1:] == ["--check"]:
        stale = out_of_sync()
        for path in stale:
            print(f"out of date: {path.relative_to(ROOT)} (python docs/hooks.py --write)")
        sys.exit(1 if stale else 0)
    else:
        sys.exit("usage: python docs/hooks.py --write | --check")

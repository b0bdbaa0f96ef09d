"""Reading files and turning parser/validation failures into one clear UserError."""

from __future__ import annotations

import difflib
import tomllib
import typing
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.errors import UserError
from orchestrator.spec.secrets import HOW_TO_PASS_A_KEY, SECRET_NAME, looks_secret, redact

BOM = b"\xef\xbb\xbf"


class Forbidding(BaseModel):
    """A job file's model: an unknown field is a typo, said with its path (see `validate`)."""

    model_config = ConfigDict(extra="forbid")


def read_text(path: Path, what: str) -> str:
    try:
        data = path.read_bytes()
        if data.startswith(BOM):
            raise UserError(
                f"the {what} starts with a UTF-8 byte-order mark (BOM)",
                file=path,
                fix="save it without BOM (as plain UTF-8)",
            )
        return data.decode("utf-8")
    except FileNotFoundError:
        raise UserError(
            f"{what} not found",
            file=path,
            fix="check the path (relative paths are taken from the current folder)",
        ) from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        raise UserError(
            f"cannot read {what}: {exc}", file=path, fix=f"point to a readable UTF-8 {what}"
        ) from None


def load_json(path: Path, what: str) -> Any:
    text = read_text(path, what)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        line = text.count("\n", 0, exc.pos) + 1
        col = exc.pos - (text.rfind("\n", 0, exc.pos) + 1) + 1
        raise UserError(
            f"malformed JSON at line {line}, column {col}: {exc.msg}",
            file=path,
            fix="correct the JSON syntax there (a missing comma or quote is the usual cause)",
        ) from None


def load_toml(path: Path, what: str) -> dict[str, Any]:
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(
            f"malformed TOML: {exc}",
            file=path,
            fix="correct the TOML syntax at the position given",
        ) from None


def field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _secret_field(loc: tuple[Any, ...]) -> bool:
    return any(isinstance(part, str) and SECRET_NAME.search(part) for part in loc)


def _fix_for(error: dict[str, Any], name: Any) -> str:
    kind = error["type"]
    if kind == "missing":
        return f"add the required field '{name}'"
    if kind == "extra_forbidden" and _secret_field(error["loc"]):
        return f"remove '{name}' or correct its spelling; {HOW_TO_PASS_A_KEY}"
    if kind == "extra_forbidden":
        return f"remove '{name}' or correct its spelling"
    if kind in {"literal_error", "enum"}:
        return "use one of the allowed values listed above"
    if kind in {"too_short", "too_long"}:
        return f"give '{name}' the number of items the message names"
    if kind in {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}:
        return f"set '{name}' within the bound the message names"
    if kind == "string_pattern_mismatch":
        return f"use only the characters the pattern allows in '{name}'"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"give '{name}' a value of the expected type"
    if isinstance(name, int) or not name:
        return "correct the entry as the message says"
    return f"change '{name}' as the message says"


def _shown(err: dict[str, Any]) -> str:
    """' (got <input>)', unless the input is a table, or may be a key: the value of an unknown
    field (a pasted `api_key = ...`), of a field whose name sounds secret, or a key-like value."""
    value = err.get("input")
    if (
        err["type"] in ("missing", "extra_forbidden")
        or isinstance(value, (dict, list))
        or _secret_field(err["loc"])
        or looks_secret(repr(value))
    ):
        return ""
    return f" (got {value!r})"


def validate(
    model: type[BaseModel],
    data: Any,
    path: Path | None,
    prefix: tuple[Any, ...] = (),
    flags: dict[str, str] | None = None,
):
    """model.model_validate(data), or a UserError naming the first bad field and its fix.

    flags: top-level fields that came from command-line options (field -> flag); a bad value
    there is blamed on the flag, not on the file."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise user_error(model, exc, path, prefix, flags) from None


def user_error(
    model: type[BaseModel],
    exc: ValidationError,
    path: Path | None = None,
    prefix: tuple[Any, ...] = (),
    flags: dict[str, str] | None = None,
) -> UserError:
    """The UserError for a failed validation of `model`: its first bad field (an unknown key
    first), with a did-you-mean for a misspelt key and how to fix it."""
    errors = exc.errors(include_url=False)
    # an unknown key first: `conditons` explains the missing `conditions` beside it
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    more = len(errors) - 1
    msg = redact(err["msg"]) + _shown(err)
    if err["type"] == "extra_forbidden" and err["loc"]:
        msg = f"unknown key '{redact(str(err['loc'][-1]))}'"
    if more:
        msg += f"; {more} more problem(s) after this one"
    loc = prefix + tuple(err["loc"])
    flag = (flags or {}).get(loc[0]) if loc else None
    if flag is not None:
        return UserError(msg, field=flag, fix=_fix_for(err, flag))
    name = err["loc"][-1] if err["loc"] else ""
    fix = _fix_for(err, name)
    if err["type"] == "extra_forbidden" and (close := _close_field(model, err, errors)):
        fix = f"did you mean '{close}'? {fix}"
    return UserError(msg, file=path, field=field_path(loc), fix=fix)


def _close_field(model: type[BaseModel], err: Any, errors: list[Any]) -> str | None:
    """The known field an unknown key is likely a misspelling of: a required one missing beside
    it, else one of its model's fields (found by walking the models along its path)."""
    name, parent = err["loc"][-1], tuple(err["loc"][:-1])
    missing = [e["loc"][-1] for e in errors if e["type"] == "missing" and e["loc"][:-1] == parent]
    known = missing or _fields_at(model, parent)
    found = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    if not found and not missing:  # a case slip: `valuefield` for `valueField`
        found = [k for k in known if str(k).lower() == str(name).lower()]
    return found[0] if found else None


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model reached along `loc` (list indexes and dict keys passed
    through), or [] where the path leaves the models."""
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if fields is None:
            return []
        if isinstance(part, str) and part in fields:
            current = _model_in(fields[part].annotation)
        # else: an index or a dict key, whose value is of the model found before it
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (itself, or inside list[...], dict[..., ...],
    ... | None), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None

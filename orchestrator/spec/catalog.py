"""The built-in catalogues in configs/: provider presets and model prices (both editable TOML)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import UserError
from orchestrator.pricing import Price
from orchestrator.spec.builtin import builtin_dir
from orchestrator.spec.loading import load_toml, validate


def catalogue_path(ref: str, base: Path) -> Path:
    """A config's presets or prices file: absolute, or relative to the config's folder."""
    path = Path(ref).expanduser()
    return path if path.is_absolute() else base / path


def _path(ref: str | None, default: str, base: Path) -> Path:
    return builtin_dir("configs") / default if ref is None else catalogue_path(ref, base)


def load_presets(ref: str | None, base: Path) -> dict[str, dict[str, Any]]:
    path = _path(ref, "presets.toml", base)
    return load_toml(path, "presets file") if path.exists() or ref else {}


def load_prices(ref: str | None, base: Path) -> dict[str, Price]:
    path = _path(ref, "prices.toml", base)
    if not path.exists() and ref is None:
        return {}
    table = load_toml(path, "price table").get("models", {})
    if not isinstance(table, dict):
        raise UserError(
            "'models' must be a table of model names",
            file=path,
            field="models",
            fix='write [models."name"] tables with input and output prices',
        )
    return {name: validate(Price, entry, path, ("models", name)) for name, entry in table.items()}


def load_batch_discounts(ref: str | None, base: Path) -> dict[str, float]:
    """The share off the online price each provider's batch API charges, from the price table's
    [batch_discount] table (0.5: half price)."""
    path = _path(ref, "prices.toml", base)
    if not path.exists() and ref is None:
        return {}
    table = load_toml(path, "price table").get("batch_discount", {})
    if not isinstance(table, dict):
        raise UserError(
            "'batch_discount' must be a table of providers",
            file=path,
            field="batch_discount",
            fix="write [batch_discount] with openai = 0.5 and so on",
        )
    for provider, share in table.items():
        if provider not in ("openai", "anthropic", "gemini"):
            raise UserError(
                f"'{provider}' has no batch API this tool speaks",
                file=path,
                field=f"batch_discount.{provider}",
                fix="list openai, anthropic or gemini",
            )
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share < 1:
            raise UserError(
                f"the batch discount of {provider} must be a share from 0 to below 1 "
                f"(0.5 is half price), not {share!r}",
                file=path,
                field=f"batch_discount.{provider}",
                fix=f"write {provider} = 0.5",
            )
    return {provider: float(share) for provider, share in table.items()}

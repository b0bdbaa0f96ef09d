"""Names for models in tables and figures that tell model identities apart.

Results are keyed by the model's identity (its key), but its label is only `provider/name`: two
set-ups of one model (T=0 and T=1) share a label. A table or figure keyed by label would merge
them, or let one silently overwrite the other, so each key gets its label plus the settings that
differ between the identities sharing it, read from the run's manifest: `simulated/m (T=0)`. A model
at temperature 0 is always named so: its repeated answers are one draw, and tables say so.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from pydantic import ValidationError

from orchestrator.spec.campaign import ModelConfig

_SHORT = {"temperature": "T"}
_LONGEST = (
    16  # a setting's value longer than this (planted answers, URLs) is named by the key instead
)


def _flat(identity: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in identity.items():
        if isinstance(value, dict) and value:
            out |= _flat(value, f"{prefix}{name}.")
        else:
            out[f"{prefix}{name}"] = value
    return out


def _identities(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for raw in manifest.get("config", {}).get("models", []):
        try:
            model = ModelConfig.model_validate(raw)
        except ValidationError:  # a manifest of another version: fall back to keys
            continue
        out[model.key] = _flat(model.identity())
    return out


_DECODING = {"temperature", "top_p", "max_tokens", "seed", "structured_output"}
_UNSET = {"answers": "generate"}  # identity fields written only when not at their default


def _setting(name: str, value: Any) -> str | None:
    text = (
        _UNSET.get(name, "default")
        if value is None
        else f"{value:g}"
        if isinstance(value, float)
        else str(value)
    )
    return f"{_SHORT.get(name, name)}={text}" if len(text) <= _LONGEST else None


def model_names(manifest: dict[str, Any]) -> dict[str, str]:
    """{model key: display name}, unique within the run."""
    labels: dict[str, str] = manifest.get("models", {})
    identities = _identities(manifest)
    by_label: dict[str, list[str]] = defaultdict(list)
    for key, label in labels.items():
        by_label[label].append(key)
    names = dict(labels)
    for label, keys in by_label.items():
        if len(keys) < 2:
            continue
        known = [identities.get(k, {}) for k in keys]
        fields = list(dict.fromkeys(f for ident in known for f in ident))  # in identity order
        differ = [f for f in fields if len({repr(ident.get(f)) for ident in known}) > 1]
        for key, ident in zip(keys, known, strict=True):
            scored = ident.get("answers") == "score"  # decoding settings do not apply to it
            settings = [
                _setting(f, ident.get(f)) for f in differ if not (scored and f in _DECODING)
            ]
            shown = [s for s in settings if s]
            name = f"{label} ({', '.join(shown)})" if shown else label
            names[key] = name if shown and len(shown) == len(settings) else f"{name} [{key}]"
    for (
        key,
        ident,
    ) in identities.items():  # a deterministic model's answers are one draw each: say so
        if (
            key in names
            and ident.get("temperature") == 0
            and not re.search(r"\bT=0[,)]", names[key])
        ):
            names[key] = f"{names[key]} (T=0)"
    if len(set(names.values())) < len(names):  # settings alike once shortened: the key decides
        names = {
            k: n if list(names.values()).count(n) == 1 else f"{n} [{k}]" for k, n in names.items()
        }
    return names

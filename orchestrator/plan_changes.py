"""What changed between the plan a run was started with and the one its config gives now, in
words a person can act on: the plan's fingerprint parts (models, jobs, samples, strategies and
a digest per prompt) compared field by field."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from orchestrator.spec.identity import identity_key, is_deterministic

if TYPE_CHECKING:  # the readers of a run import this module: they need no pydantic models
    from orchestrator.spec.models import Job, Strategy


def _digest(*parts: Any) -> str:
    return hashlib.blake2b(orjson.dumps(parts), digest_size=8).hexdigest()


def prompt_digests(job: Job, strategies: Iterable[Strategy]) -> dict[str, str]:
    """A short digest of every text that goes into the job's prompts, by a readable name: the
    system prompt, each strategy, each condition (`<experiment>:<index>`, with `/<variant>` when
    it has several). A changed prompt can then be named without the manifest holding prompts."""
    strategies = list(strategies)
    digests = {"system": _digest(job.system_prompt)}
    for s in strategies:
        digests[f"strategy:{s.id}"] = _digest(s.system_prompt, s.user_suffix)
    uses_bias = any("{bias}" in (s.user_suffix or "") for s in strategies)
    for exp in job.experiments:
        # what a strategy's {bias} becomes, if one says it (see render_messages)
        bias = exp.bias_label if uses_bias else None
        for cond in exp.conditions:
            for v in cond.variants:
                name = f"{exp.slug}:{cond.index}" + (f"/{v.id}" if len(cond.variants) > 1 else "")
                digests[name] = _digest(
                    v.prompt,
                    v.contract.model_dump(mode="json"),
                    v.present_options,
                    bias,
                    *filter(None, [v.instruction]),
                )
    return digests


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)


def _label(identity: dict[str, Any]) -> str:
    return f"{identity.get('provider')}/{identity.get('name')}"


def _identity_changes(what: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [
        f"{what} {_label(new)}: {k} {_show(old.get(k))} -> {_show(new.get(k))}"
        for k in dict.fromkeys([*old, *new])
        if old.get(k) != new.get(k)
    ]


def _model_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    """Per model: its changed settings (paired by provider/name), or that it was added/removed."""
    gone = [m for m in old if m not in new]
    came = [m for m in new if m not in old]
    lines = []
    for o in list(gone):
        n = next((n for n in came if _label(n) == _label(o)), None)
        if n is not None:
            lines += _identity_changes("model", o, n)
            gone.remove(o)
            came.remove(n)
    lines += [f"model {_label(m)} removed" for m in gone] + [
        f"model {_label(m)} added" for m in came
    ]
    return lines or (
        [f"order of models: {', '.join(map(_label, old))} -> {', '.join(map(_label, new))}"]
        if old != new
        else []
    )


def _list_changes(what: str, old: list[str], new: list[str]) -> list[str]:
    lines = [f"{what}: {x} removed" for x in old if x not in new]
    lines += [f"{what}: {x} added" for x in new if x not in old]
    return lines or ([f"{what}: order {', '.join(old)} -> {', '.join(new)}"] if old != new else [])


def _prompt_changes(old: dict[str, str], new: dict[str, str], job: str) -> list[str]:
    def name(key: str) -> str:
        return (
            "the system prompt"
            if key == "system"
            else f"prompt of strategy {key.split(':', 1)[1]}"
            if key.startswith("strategy:")
            else f"prompt of {key}"
        )

    lines = [f"{name(k)}{job}" for k in new if k in old and old[k] != new[k]]
    lines += [f"{name(k)}{job}: removed" for k in old if k not in new]
    return lines + [f"{name(k)}{job}: added" for k in new if k not in old]


def _by_model(fingerprint: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Samples per cell by model key and job; a run from before samples_by_model gave every
    model the job's samples."""
    if "samples_by_model" in fingerprint:
        return fingerprint["samples_by_model"]
    return {
        key: dict(fingerprint.get("samples") or {}) for key in fingerprint.get("per_model") or {}
    }


def _model_samples_changes(old: dict[str, Any], new: dict[str, Any], job: str) -> list[str]:
    """A model whose samples changed other than the job's did (a model at temperature 0 gets
    the job's deterministic minimum by default)."""
    job_change = ((old.get("samples") or {}).get(job), (new.get("samples") or {}).get(job))
    before, after = _by_model(old), _by_model(new)
    lines = []
    for identity in new.get("models") or []:
        key = identity_key(identity)
        o, n = (before.get(key) or {}).get(job), (after.get(key) or {}).get(job)
        if None not in (o, n) and o != n and (o, n) != job_change:
            why = (
                " (at temperature 0 the default is the job's deterministic minimum; set samples "
                "to choose)"
                if is_deterministic(identity)
                else ""
            )
            lines.append(f"samples of {job} on {_label(identity)}: {o} -> {n}{why}")
    return lines


_MAX_PROMPT_LINES = 10


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two fingerprints, one line per item, e.g. `model openai/gpt-4o:
    temperature 0.0 -> 0.3` or `prompt of anchoring-first-number:1`. Empty if nothing does."""
    changes = _list_changes("jobs", old.get("jobs") or [], new.get("jobs") or [])
    changes += _model_changes(old.get("models") or [], new.get("models") or [])
    for helper in ("extractor", "screener"):
        o_ext, n_ext = old.get(helper), new.get(helper)
        if o_ext != n_ext:
            changes += (
                [f"{helper} {_label(o_ext)} removed"]
                if n_ext is None
                else [f"{helper} {_label(n_ext)} added"]
                if o_ext is None
                else _identity_changes(helper, o_ext, n_ext)
            )
    common = [j for j in new.get("jobs") or [] if j in (old.get("jobs") or [])]
    several = len(new.get("jobs") or []) > 1
    prompts = []
    for job in common:
        of = f" (job {job})" if several else ""
        for key, diff in (("samples", None), ("strategies", _list_changes)):
            o, n = (old.get(key) or {}).get(job), (new.get(key) or {}).get(job)
            if o != n:
                changes += (
                    [f"{key} of {job}: {_show(o)} -> {_show(n)}"]
                    if diff is None
                    else diff(f"strategies of {job}", o or [], n or [])
                )
        changes += _model_samples_changes(old, new, job)
        if "prompts" in old and "prompts" in new:
            prompts += _prompt_changes(old["prompts"].get(job, {}), new["prompts"].get(job, {}), of)
    if len(prompts) > _MAX_PROMPT_LINES:
        prompts = prompts[:_MAX_PROMPT_LINES] + [
            f"... and {len(prompts) - _MAX_PROMPT_LINES} more prompts"
        ]
    changes += prompts
    for key in ("seed", "tasks"):
        if old.get(key) != new.get(key):
            changes.append(f"{key}: {_show(old.get(key))} -> {_show(new.get(key))}")
    if not changes and (
        old.get("hash") != new.get("hash")
        or any(  # e.g. a run from before
            old.get(k) != new.get(k) for k in ("per_model", "samples", "strategies")
        )
    ):  # digests
        changes.append("prompts or response contracts of the jobs changed")
    return changes

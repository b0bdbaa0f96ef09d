"""The viewer's summaries: a run's overview (manifest, progress, spend, effects), the answers
behind one effect, per condition, and a campaign's history. The effects and the history are
what `analyze`, `history` and `compare` compute (nightly/effects.py, history.py, compare.py),
kept once per state of the results files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from orchestrator.analysis.effects import EFFECT_SCHEMA
from orchestrator.errors import UserError
from orchestrator.viewer.data import NotFound, RunData, model_settings, now_iso

_TOP = 20
EFFECTS_EVERY_S = 30.0


def effects(data: RunData) -> pl.DataFrame:
    def compute() -> pl.DataFrame:
        from orchestrator.nightly.effects import run_effects

        if data.loaded().frame.height == 0:
            return pl.DataFrame(schema=EFFECT_SCHEMA)
        return run_effects(data.path).effects.select(list(EFFECT_SCHEMA))

    # analysis of a large run takes seconds: while a run is going, its effects follow it
    # every EFFECTS_EVERY_S (its progress, on every poll)
    return data.cached("effects", compute, EFFECTS_EVERY_S)


def overview(data: RunData) -> dict[str, Any]:
    loaded, m = data.loaded(), data.manifest
    counts = {
        (k, s): n for k, s, n in loaded.frame.group_by("modelKey", "status").len().iter_rows()
    }
    names, per_model = data.names, m["plan"]["per_model"]
    models = []
    for key, settings in model_settings(m):
        by_status = {s: n for (k, s), n in sorted(counts.items()) if k == key}
        done = sum(n for s, n in by_status.items() if s != "failed")  # as status and resume count
        tasks = per_model.get(key, 0)
        models.append(
            {
                "key": key,
                "label": names.get(key, key),
                "settings": settings,
                "tasks": tasks,
                "done": done,
                "pending": tasks - done,
                "byStatus": by_status,
                "spendUsd": loaded.spend.get(key) or 0.0,
            }
        )
    status_counts: dict[str, int] = {}
    for (_, s), n in sorted(counts.items()):
        status_counts[s] = status_counts.get(s, 0) + n
    return {
        "run": {
            "campaign": m["campaign"],
            "runId": m["runId"],
            "createdAt": m["createdAt"],
            "software": m["software"],
            "seed": m["plan"].get("seed"),
            "planHash": m["plan"]["hash"],
            "tasks": m["plan"]["tasks"],
        },
        "models": models,
        "statusCounts": status_counts,
        "spendUsd": sum(v or 0.0 for v in loaded.spend.values()),
        "effects": effects(data).to_dicts(),
        "note": loaded.note,
        "updatedAt": now_iso(),
    }


# The parameters that name an effect, and the effects table's columns they match.
EFFECT_KEY = {
    "study": "study",
    "measure": "measure",
    "experiment": "experiment",
    "strategy": "strategy",
    "model": "modelKey",
}
_SHOWN = 12  # values listed in an error, at most


def effect(data: RunData, params: dict[str, str]) -> dict[str, Any]:
    """An effect's row and, per condition behind it, its answers: how many, the most frequent
    ones and the first rows (control and treatment side by side). study and model are
    required; a parameter left out matches any value, so the given ones need only name one
    effect. Where they name several, the one with no value in each left-out column is taken
    (the page leaves out an empty value); otherwise a 400 names what tells them apart."""
    given = {k: params.get(k) or None for k in EFFECT_KEY}
    table = effects(data)
    if missing := [k for k in ("study", "model") if given[k] is None]:
        raise UserError(
            f"an effect needs {' and '.join(missing)} (and, where they name several, "
            "measure, experiment or strategy)",
            fix=f"give {_choices(table, missing)}",
        )
    named = {k: v for k, v in given.items() if v is not None}
    found = table.filter(*(pl.col(EFFECT_KEY[k]) == v for k, v in named.items()))
    left_out = [k for k in EFFECT_KEY if k not in named]
    if found.height > 1 and left_out:
        empty = found.filter(*(pl.col(EFFECT_KEY[k]).is_null() for k in left_out))
        if empty.height == 1:
            found = empty
    if not found.height:
        raise NotFound("no such effect in this run", fix="open it from the effects table")
    if apart := [k for k in left_out if found[EFFECT_KEY[k]].n_unique() > 1]:
        raise UserError(
            f"{', '.join(f'{k} {v}' for k, v in named.items())} name {found.height} "
            f"effects, told apart by {' and '.join(apart)}",
            fix=f"give {_choices(found, apart)}, or open the effect from the effects table",
        )
    row = found.row(0, named=True)
    wanted = {k: row[c] for k, c in EFFECT_KEY.items()}
    frame = data.loaded().frame
    rows = frame.filter(pl.col("study") == wanted["study"], pl.col("modelKey") == wanted["model"])
    # Paired effects name their experiment; other studies pool experiments into an effect (a
    # bias, a kind of item), which no record names: their answers are the study's, said so.
    scope = (
        "experiment"
        if wanted["experiment"] in set(frame["experimentSlug"].unique().to_list())
        else "study"
    )
    if scope == "experiment":
        rows = rows.filter(pl.col("experimentSlug") == wanted["experiment"])
    if wanted["strategy"] is not None:
        rows = rows.filter(pl.col("strategy") == wanted["strategy"])
    labels, conditions = data.labels, []
    bins = _bins(rows)
    for (index,), part in sorted(
        rows.partition_by("conditionIndex", as_dict=True, maintain_order=True).items(),
        key=lambda kv: (kv[0][0] is None, kv[0][0] or 0),
    ):
        dist = _distribution(part, bins)
        experiments = part["experimentSlug"].unique().to_list()
        label = (
            labels.get((experiments[0], index))
            if len(experiments) == 1
            else f"condition {index} of {len(experiments)} experiments"
        )
        conditions.append(
            {
                "index": index,
                "label": label,
                "total": part.height,
                "distribution": dist,
                "rows": data.rows(part.head(_TOP)),
            }
        )
    return {"effect": row, "scope": scope, "conditions": conditions}


def _choices(table: pl.DataFrame, keys: list[str]) -> str:
    """Each parameter with the values its column takes in `table`, as an error lists them."""

    def values(column: str) -> str:
        got = sorted(v for v in table[column].unique().to_list() if v is not None)
        more = f", and {len(got) - _SHOWN} more" if len(got) > _SHOWN else ""
        return f"one of {', '.join(got[:_SHOWN])}{more}" if got else "none in this run"

    return "; ".join(f"{k} ({values(EFFECT_KEY[k])})" for k in keys)


BINS = 10


def _bins(rows: pl.DataFrame) -> list[float] | None:
    """Shared edges for numeric answers with more distinct values than a list can show: the
    conditions' distributions side by side, over the same bins. None for choices."""
    values = rows["answer"].drop_nulls().cast(pl.Float64, strict=False)
    if values.len() == 0 or values.null_count() or rows["answer"].drop_nulls().n_unique() <= _TOP:
        return None
    low, high = float(values.min()), float(values.max())
    if not low < high:
        return None
    step = (high - low) / BINS
    return [low + i * step for i in range(BINS)] + [high]


def _distribution(part: pl.DataFrame, bins: list[float] | None) -> list[dict[str, Any]]:
    """The answers and how often each came (the most frequent first); numeric answers counted
    in `bins` (the last one closed), in their order, with no answer last."""
    if bins is None:
        return (
            part.group_by("answer")
            .len("count")
            .sort(["count", "answer"], descending=[True, False], nulls_last=True)
            .head(_TOP)
            .to_dicts()
        )
    values = part["answer"].cast(pl.Float64, strict=False)
    out = []
    for i, (lo, hi) in enumerate(zip(bins, bins[1:])):
        last = i == len(bins) - 2
        n = int(((values >= lo) & ((values <= hi) if last else (values < hi))).sum())
        out.append({"answer": f"{lo:.4g} to {hi:.4g}", "count": n})
    if missing := int(values.is_null().sum()):
        out.append({"answer": None, "count": missing})
    return out


class History:
    """A campaign folder's runs (nightly/history.py) and the comparison of its last two."""

    def __init__(self, campaign_dir: Path) -> None:
        self.campaign_dir = campaign_dir
        self._cache: tuple[Any, Any] | None = None

    def _state(self) -> tuple:
        from orchestrator.nightly.runs import campaign_runs
        from orchestrator.viewer.data import file_state

        return tuple(
            (r.name, file_state(r / "results.ndjson")) for r in campaign_runs(self.campaign_dir)
        )

    def get(self) -> dict[str, Any]:
        state = self._state()
        if self._cache is None or self._cache[0] != state:
            self._cache = (state, self._compute())
        return self._cache[1]

    def _compute(self) -> dict[str, Any]:
        from orchestrator.nightly.compare import FLAGS, as_json
        from orchestrator.nightly.comparing import load_and_compare
        from orchestrator.nightly.history import campaign_history
        from orchestrator.nightly.runs import nights

        runs = nights(self.campaign_dir, "view")
        comparison = None
        if len(runs) >= 2:
            c = load_and_compare(runs[-2], runs[-1])
            wanted = set(FLAGS)
            comparison = as_json(c, wanted, 1 if c.counted(wanted) else 0)
        return {"runs": campaign_history(self.campaign_dir).to_dicts(), "comparison": comparison}

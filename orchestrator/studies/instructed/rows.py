"""The Instructed to Bias tables as rows of text: shared by the terminal and the report."""

from __future__ import annotations

import polars as pl

from orchestrator.report.format import fmt
from orchestrator.studies.instructed.inference import ALIKE


def series_label(model: str, strategy: str, strategies: int) -> str:
    return model if strategies < 2 else f"{model} [{strategy}]"


def _label(r: dict, strategies: int) -> str:
    return series_label(r["model"], r["strategy"], strategies)


def _ci(value, low, high) -> str:
    return f"{fmt(value)} [{fmt(low)}, {fmt(high)}]"


def _p(value, note: str | None) -> str:
    return fmt(value, 3) + (" (exact)" if note == ALIKE else "")


def score_rows(
    scores: pl.DataFrame, extra: tuple[tuple[str, str], ...] = ()
) -> list[dict[str, str]]:
    """One row per score; `extra`: (header, column) pairs shown after the model."""
    strategies = scores["strategy"].n_unique() if scores.height else 1
    rows = []
    for r in scores.iter_rows(named=True):
        decoy = r["attraction"] is not None
        constant = r["t"] is None and r["p_t"] is not None and not decoy
        row = {
            "model": _label(r, strategies),
            **{h: str(r[c]) for h, c in extra},
            "bias score": r["score"] + (" †" if decoy else ""),
            "treatment": f"{fmt(r['share_treatment'])} (n={r['n_treatment']})",
            "control": f"{fmt(r['share_control'])} (n={r['n_control']})",
            "score [95% CI]": _ci(r["bias_score"], r["ci_low"], r["ci_high"]),
            "p": _p(r["p"], r["note"]),
            "value cells": str(r["cells"]),
            "t (df)": "constant" if constant else f"{fmt(r['t'])} ({fmt(r['t_df'], 6)})",
            "p (prompts, Fisher)": fmt(r["p_fisher"], 3),
            "attraction [95% CI]": _ci(
                r["attraction"], r["attraction_ci_low"], r["attraction_ci_high"]
            )
            if decoy
            else "–",
            "p (attraction)": _p(r["attraction_p"], r["attraction_note"]) if decoy else "–",
            "unparsed": str(r["unparsed_treatment"] + r["unparsed_control"]),
        }
        rows.append(row)
    return rows


def accuracy_rows(accuracy: pl.DataFrame) -> list[dict[str, str]]:
    strategies = accuracy["strategy"].n_unique()
    return [
        {
            "model": _label(r, strategies),
            "words": r["words"],
            "accuracy [95% CI]": _ci(r["accuracy"], r["ci_low"], r["ci_high"])
            + (f" ({r['note']})" if r["ci_low"] is None and r["note"] else ""),
            "correct / parsed": f"{r['correct']} / {r['n']}",
            "unparsed": str(r["unparsed"]),
        }
        for r in accuracy.iter_rows(named=True)
    ]


def did_rows(did: pl.DataFrame) -> list[dict[str, str]]:
    strategies = did["strategy"].n_unique()
    return [
        {
            "first model": r["model_a"],
            "second model": r["model_b"],
            **({"strategy": r["strategy"]} if strategies > 1 else {}),
            "bias score": r["score"] + (" †" if r["score"].startswith("Decoy") else ""),
            "first": fmt(r["bias_a"]),
            "second": fmt(r["bias_b"]),
            "difference [95% CI]": _ci(r["did"], r["ci_low"], r["ci_high"]),
            "p": _p(r["p"], r["note"]),
            "attraction difference [95% CI]": _ci(
                r["attraction_did"], r["attraction_ci_low"], r["attraction_ci_high"]
            )
            if r["attraction_did"] is not None
            else "–",
            "p (attraction)": _p(r["attraction_p"], r["attraction_note"])
            if r["attraction_did"] is not None
            else "–",
        }
        for r in did.iter_rows(named=True)
    ]

"""The Bias Strength Index report sections: BSI per bias and model with its uncertainty and
tests, the heatmap and uncertainty figures, debiasing, and parse failures by condition."""
from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.report.format import fmt
from orchestrator.studies.base import ReportPart, Section
from orchestrator.studies.bias_strength import plots

BSI_NOTE = ("BSI per variant: |mean_T - mean_C| / |anchor - mean_C| (numbers) or |p_T - p_C| (share "
            "choosing the bias-predicted option, scored by role whatever position it was shown in). "
            "σ_stat: bootstrap SD (10,000 resamples, seeded) averaged over variants; σ_sys: SD across "
            "the K variants; σ_tot in quadrature. Variant-level one-sample t-test on the signed BSI and "
            "a trial-level mixed model (random intercept per variant; odds ratio for choices, pooled "
            "normalised shift for numbers), each Benjamini-Hochberg corrected across bias x model "
            "within a strategy (* q < 0.05); robust check: pooled model with variant-clustered errors.")


def _bsi_rows(summary: pl.DataFrame) -> list[dict[str, str]]:
    star = lambda q: f"{fmt(q, 2)}{' *' if q is not None and q < 0.05 else ''}"  # noqa: E731
    return [{"strategy": r["strategy"], "model": f"{r['model']} [{r['modelKey']}]", "bias": r["experimentSlug"],
             "K": str(r["K"]), "BSI ± σ_tot": f"{fmt(r['bsi'])} ± {fmt(r['sigma_tot'])}",
             "σ_stat / σ_sys": f"{fmt(r['sigma_stat'])} / {fmt(r['sigma_sys'])}", "signed BSI": fmt(r["bsi_signed"]),
             "variant t-test q": star(r["q_variant"]),
             "mixed model q (OR or Δ)": f"{star(r['q_mixed'])} ({fmt(r['odds_ratio'] if r['odds_ratio'] is not None else r['mixed_effect'], 3)})",
             "robust check p": fmt(r["robust_p"], 2), "notes": r["reason"] or ""}
            for r in summary.iter_rows(named=True)]


def _debias_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [{"bias": r["experimentSlug"], "model": r["model"], "strategy": r["strategy"],
             "BSI baseline": fmt(r["bsi_baseline"]), "BSI with strategy": fmt(r["bsi"]),
             "reduction": "–" if r["reduction"] is None else f"{r['reduction']:.0%}"}
            for r in table.iter_rows(named=True)]


def _parse_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [{"model": r["model"], "strategy": r["strategy"],
             "parse errors control": f"{r['pe_C']}/{r['rec_C']}", "parse errors treatment": f"{r['pe_T']}/{r['rec_T']}",
             "p (failures depend on condition)": fmt(r["p_depends_on_condition"], 2)}
            for r in table.iter_rows(named=True)]


def report(summary: pl.DataFrame, debiasing: pl.DataFrame, parse: pl.DataFrame, out_dir: Path) -> ReportPart:
    part = ReportPart()
    if not summary.height:
        return part
    first = summary["strategy"][0]
    main = summary.filter(pl.col("strategy") == ("baseline" if "baseline" in summary["strategy"] else first))
    part.sections.append(Section("Bias Strength Index", BSI_NOTE, _bsi_rows(summary),
                                 (("bsi-heatmap", plots.bsi_heatmap(main, out_dir / "bsi-heatmap.png")),
                                  ("bsi-uncertainty", plots.bsi_uncertainty(main, out_dir / "bsi-uncertainty.png")))))
    if debiasing.height:
        part.sections.append(Section("Debiasing", "BSI under each strategy against the baseline; "
                                     "reduction = 1 - BSI_strategy / BSI_baseline.", _debias_rows(debiasing)))
    part.sections.append(Section("Parse failures by condition", "Failures that depend on the condition "
                                 "would bias the BSI (chi-square, or Fisher's exact test for small counts).",
                                 _parse_rows(parse)))
    return part

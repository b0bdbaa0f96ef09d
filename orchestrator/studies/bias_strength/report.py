"""The Bias Strength Index report sections: BSI per bias and model with its uncertainty and
tests, the heatmap and uncertainty figures, debiasing, and parse failures by condition."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.report.format import fmt
from orchestrator.studies.base import ReportPart, Section
from orchestrator.studies.bias_strength import plots
from orchestrator.studies.bias_strength.marks import star
from orchestrator.studies.bias_strength.robust import dagger, robust_cell

BSI_NOTE = (
    "Signed BSI per variant (the headline for direction; > 0 is the way the bias predicts): "
    "(mean_T - mean_C) / (anchor - mean_C) for numbers, p_T - p_C for choices (p: share choosing "
    "the bias-predicted option, scored by role whatever position it was shown in); |BSI|, the "
    "paper's definition, is its absolute value, averaged over variants ± σ_tot. Where the treatment "
    "adds an option (the decoy), p is the attraction effect: the predicted role's share among the "
    "answers in the options both conditions show (target or competitor); answers for the added "
    "option are counted apart (extra-option share), as with them a respondent choosing at random "
    "would score 1/3 - 1/2. "
    "σ_stat: bootstrap SD (10,000 resamples, seeded) averaged over variants; σ_sys: SD across "
    "the K variants, unknown for K < 2 (and then σ_tot too); σ_tot in quadrature. τ: the mixed "
    "model's between-variant SD of the effect, net of sampling noise (on its scale: log odds ratio "
    "for choices, normalised shift for numbers). Under no bias |BSI| and σ_sys are pushed above 0 "
    "by sampling noise alone (|BSI| is the mean of absolute noisy values; σ_sys includes sampling "
    "noise), so read the signed BSI and τ for prompt sensitivity. Variant-level "
    "one-sample t-test (two-sided) on the signed BSI, and a mixed model with a random slope for "
    "condition by variant that asks whether the effect generalises across prompt variants "
    "(typical variant's odds ratio for choices, 0.5 added to each cell; pooled normalised shift "
    "for numbers; REML weights, CR2 standard error with Bell-McCaffrey degrees of freedom), so "
    "with 3-5 variants only an effect consistent across them is significant. Each is "
    "Benjamini-Hochberg corrected across bias x model within a strategy: the q columns are "
    'BH-adjusted (* q < 0.05 for an effect in the predicted direction; "(opposite)" for one '
    "against it, which is no evidence of the bias). Robust check (p unadjusted): one pooled model over all answers "
    "with variant-clustered CR2 errors and Bell-McCaffrey degrees of freedom. The heatmap (baseline) colours "
    "the signed BSI on a diverging scale and marks significance only for effects in the "
    "predicted direction. Numbers also get a robust signed BSI beside the paper's: per variant "
    "the Hodges-Lehmann shift (the median of all treatment-minus-control differences) over "
    "anchor - median_C, and per bias the median of the variants' values with the "
    "order-statistic interval for that median: 95% from 6 variants, below that [min, max] at "
    "its own level, shown in brackets (75%, 87.5%, 93.75% for 3, 4, 5 variants). † marks a "
    "bias whose mean signed BSI one variant carries (leaving out the variant farthest from "
    "the median moves the mean by more than the larger of 1 and the rest's mean, at T=0 "
    "too), or with a variant whose mean a few answers dominate (leaving out the two "
    "farthest from their condition's median moves mean_T - mean_C by more than the full "
    "width of its Welch CI without them and by a quarter of its size or of the answers' SD); "
    "the notes name them. Answers outside a variant's plausibleRange are counted in the notes "
    "and kept in the BSI."
)
FRAMING_NOTE = (
    ' Framing: in the built-in job the control describes each option in full ("100 saved and '
    '200 die") and the treatment in the loss frame only ("200 die"); the paper compares a '
    "gain frame with a loss frame, so this BSI is the shift from a neutral description to the "
    "loss frame, not comparable with the paper's framing values (nor the human 0.50)."
)
DEBIAS_NOTE = (
    "BSI (mean |BSI| over variants) under each strategy against the baseline. Δ signed BSI = "
    "signed BSI_strategy - signed BSI_baseline with a 95% percentile bootstrap CI (10,000 resamples "
    "of the trials of every variant x condition, in both arms); 'CI excludes 0' says whether the "
    "change is more than sampling noise. The CI is conditional on these prompt variants: trials are "
    "resampled within each variant x condition, the variants are held fixed, so it says nothing "
    "about other wordings. It is the signed difference that decides: the same interval for the "
    "|BSI| difference bootstraps absolute values of noise and near 0 covers a null difference "
    "99-100% of the time, a test without power (it stays in the results file, diff_ci_*). "
    "Reduction = 1 - BSI_strategy / BSI_baseline, as in the paper, shown only where the signed "
    "CI excludes 0: in a simulated campaign with no bias at all, noise alone gave reductions from "
    "-255% to +66%. At T=0 a variant's "
    "answers are one answer repeated: Δ is exact for these prompts and option orders and gets no "
    "CI (resampling the repeats as independent trials would invent noise). The CIs are not "
    "adjusted for the number of comparisons."
)


def _notes(r: dict) -> str:
    return "; ".join(n for n in (r["reason"], r.get("sigma_note"), r.get("robust_note")) if n)


def _bsi_rows(summary: pl.DataFrame) -> list[dict[str, str]]:
    extra = (
        summary["extra_share_T"].is_not_null().any()
        if "extra_share_T" in summary.columns
        else False
    )
    numbers = "bsi_robust_signed" in summary.columns and (summary["kind"] == "number").any()
    return [
        {
            "strategy": r["strategy"],
            "model": f"{r['model']} [{r['modelKey']}]",
            "bias": r["experimentSlug"],
            "K": str(r["K"]),
            "signed BSI": fmt(r["bsi_signed"]) + dagger(r),
            "abs. BSI ± σ_tot": f"{fmt(r['bsi'])} ± {fmt(r['sigma_tot'])}",
            "σ_stat / σ_sys": f"{fmt(r['sigma_stat'])} / {fmt(r['sigma_sys'])}",
            "τ (log OR or Δ)": fmt(r["mixed_tau"]),
            "variant t-test q": fmt(r["q_variant"], 2) + star(r["q_variant"], r["bsi_signed"]),
            "mixed model q (OR or Δ)": f"{fmt(r['q_mixed'], 2)}{star(r['q_mixed'], r['mixed_effect'])} "
            f"({fmt(r['odds_ratio'] if r['odds_ratio'] is not None else r['mixed_effect'], 3)})",
            "robust check p (unadjusted)": fmt(r["robust_p"], 2),
        }
        | ({"robust signed BSI (HL, median) [CI]": robust_cell(r)} if numbers else {})
        | ({"extra-option share (T)": fmt(r["extra_share_T"], 2)} if extra else {})
        | {"notes": _notes(r)}
        for r in summary.iter_rows(named=True)
    ]


def _ci(estimate, low, high) -> str:
    return (
        fmt(estimate)
        if low is None and high is None
        else f"{fmt(estimate)} [{fmt(low)}, {fmt(high)}]"
    )


def _reduction(r: dict) -> str:
    """The paper's reduction, only where the change is more than sampling noise."""
    if r.get("deterministic"):
        return "– (T=0, no CI)"
    if r["reduction"] is None:
        return "–"
    return f"{r['reduction']:.0%}" if r["ci_excludes_zero"] else "– (within noise)"


def _debias_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "bias": r["experimentSlug"],
            "model": f"{r['model']} [{r['modelKey']}]",
            "strategy": r["strategy"],
            "BSI baseline": fmt(r["bsi_baseline"]),
            "BSI with strategy": fmt(r["bsi"]),
            "Δ signed BSI [95% CI]": _ci(r["signed_diff"], r["signed_ci_low"], r["signed_ci_high"]),
            "CI excludes 0": {True: "yes", False: "no", None: "–"}[r["ci_excludes_zero"]],
            "reduction": _reduction(r),
            "notes": r.get("note") or "",
        }
        for r in table.iter_rows(named=True)
    ]


def _parse_rows(table: pl.DataFrame) -> list[dict[str, str]]:
    return [
        {
            "model": f"{r['model']} [{r['modelKey']}]",
            "strategy": r["strategy"],
            "parse errors control": f"{r['pe_C']}/{r['rec_C']}",
            "parse errors treatment": f"{r['pe_T']}/{r['rec_T']}",
            "p (failures depend on condition; unadjusted)": fmt(r["p_depends_on_condition"], 2),
        }
        for r in table.iter_rows(named=True)
    ]


def report(
    summary: pl.DataFrame, debiasing: pl.DataFrame, parse: pl.DataFrame, out_dir: Path
) -> ReportPart:
    part = ReportPart()
    if not summary.height:
        return part
    first = summary["strategy"][0]
    main = summary.filter(
        pl.col("strategy") == ("baseline" if "baseline" in summary["strategy"] else first)
    )
    note = BSI_NOTE + (FRAMING_NOTE if "framing" in summary["experimentSlug"] else "")
    part.sections.append(
        Section(
            "Bias Strength Index",
            note,
            _bsi_rows(summary),
            (
                ("bsi-heatmap", plots.bsi_heatmap(main, out_dir / "bsi-heatmap.png")),
                ("bsi-uncertainty", plots.bsi_uncertainty(main, out_dir / "bsi-uncertainty.png")),
            ),
        )
    )
    if debiasing.height:
        part.sections.append(Section("Debiasing", DEBIAS_NOTE, _debias_rows(debiasing)))
    part.sections.append(
        Section(
            "Parse failures by condition",
            "Failures that depend on the condition "
            "would bias the BSI (chi-square, or Fisher's exact test for small counts).",
            _parse_rows(parse),
        )
    )
    return part

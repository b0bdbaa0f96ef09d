"""Power of the bias-strength study's test (seed 001): the variant-level t-test.

The headline is the signed BSI of a bias on a model under a strategy, the mean over its K
prompt variants of each variant's signed BSI (p_T - p_C for choices; (mean_T - mean_C) /
(anchor - mean_C) for numbers). The test (inference.py `bias_summary`) is a one-sample t-test
of those K values against 0 (K - 1 degrees of freedom), Benjamini-Hochberg corrected over the
bias x model tests of each strategy, significant at q < alpha. It is planned at alpha / m
(analysis/power.py `bh_level`), m the tests of a strategy: the level BH holds one real effect
among m nulls to (with more real effects its thresholds rise, so power is at least this).

The unit is the variant. One variant's signed BSI varies as tau^2 (the variants' true effects
spread around the bias's mean: wording) plus its sampling noise within(effect) / n at n
answers per condition, where within is the variance of one answer in BSI units summed over
the two conditions: p_C(1 - p_C) + p_T(1 - p_T) for a choice; for a number, by the delta
method, (var_T + (1 - effect)^2 var_C) / (anchor - mean_C)^2 (the control mean is in the
denominator too). Only the noise shrinks with samples: tau / sqrt(K) is the floor that only
more variants lower.

With 3-5 variants and a BH level of 0.005 or less, the t-test's own variance estimate costs
power that the normal formula misses (10-20% of the MDE): the MDE here is the noncentral-t
one at 80% power, carried by `se_true` (set so that the generic formula returns it). At other
powers it is approximate: within 3% of the noncentral-t MDE at 90-95%, and 8-18% above it
(conservative) at 50%.

A deterministic model (temperature 0) gives one answer per prompt, repeated: the study still
runs its t-test over variants, but a variant's noise is one draw per option order shown (one
for a number), whatever the samples: only more variants help.

Defaults without a pilot: choices at shares either side of 0.5 (the binomial variance's
maximum, falling by effect^2 / 2 as the shares part); a number's answer SD half the distance
from the control's answers to the anchor (the BSI has no answer scale of its own); the
variants' true effects spreading with SD tau = 0.1 on the BSI scale (10 points of share, a
tenth of the way to the anchor) for both. A pilot gives each bias's answer variances (on
this model where it ran it, else pooled over the pilot's models) and tau^2, the spread of the
variants' signed BSIs net of their sampling noise (`spread_of_effects`), pooled over the
bias x strategy groups of the same kind (choice or number), since 3-5 variants alone say
little about it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from scipy import optimize, stats

from orchestrator.analysis.power import Planned, Precision, bh_level, mde, spread_of_effects
from orchestrator.studies.bias_strength import KIND

TEST = "t over variants' signed BSIs"
DEFAULT_TAU = 0.1  # the variants' true effects: SD on the BSI scale
PLANNED_POWER = 0.8  # the power the noncentral-t MDE is exact at


@dataclass(frozen=True)
class Spread:
    """What the MDE needs: the variants' spread of true effects (tau) and one answer's
    variance in each condition, in BSI units."""

    tau: float
    var_c: float
    var_t: float
    kind: str  # "choice" or "number"
    centred: bool = False  # choices at shares either side of 0.5, parting as the effect grows


def within(spread: Spread, effect: float) -> float:
    """One answer per condition's variance of a variant's signed BSI, at the bias's mean
    effect (the variants' own effects spread by tau around it)."""
    if spread.kind == "number":  # (1 - effect) at most 1: past the anchor is no noisier
        return spread.var_t + ((1 - min(max(effect, 0.0), 1.0)) ** 2 + spread.tau**2) * spread.var_c
    value = spread.var_c + spread.var_t
    if spread.centred:  # p(1 - p) = 1/4 - (p - 1/2)^2 at p = 1/2 -+ effect_j / 2
        value -= (effect**2 + spread.tau**2) / 2
    return max(value, 0.0)


@lru_cache(maxsize=256)
def small_k(df: int, level: float, power: float = PLANNED_POWER) -> float:
    """se_true / se_test such that t(1 - level/2) se_test + t(power) se_true is the
    noncentral-t MDE: the effect (in standard errors) the t-test on df degrees of freedom
    detects with probability `power` at `level`, two-sided."""
    crit = float(stats.t.ppf(1 - level / 2, df))

    def short(ncp: float) -> float:
        lower = float(stats.nct.cdf(-crit, df, ncp))
        return float(stats.nct.sf(crit, df, ncp)) + (lower if math.isfinite(lower) else 0) - power

    high = crit + 1
    while short(high) < 0:
        high *= 2
    ncp = optimize.brentq(short, 0.0, high, xtol=1e-9)
    return (ncp - crit) / float(stats.t.ppf(power, df))


def variant_design(variants: int, spread: Spread, level: float, draws: int | None = None):
    """The t-test over `variants` signed BSIs at `samples` answers per variant and condition;
    `draws`: a deterministic model's distinct answers per variant and condition (option
    orders), which samples do not add to.

    The noise depends on the effect (shares part, a number's control mean counts less), and
    the t-test's multiplier is large (10 at 4 variants and level 0.005), so the generic
    fixed-point iteration on the effect would oscillate: the design solves for its own MDE at
    80% power and gives the errors there, whatever effect it is asked at."""
    df = variants - 1
    stretch = small_k(df, level)
    multiplier = float(stats.t.ppf(1 - level / 2, df) + stats.t.ppf(PLANNED_POWER, df) * stretch)

    def se_at(n: int, effect: float) -> float:
        return math.sqrt((spread.tau**2 + within(spread, effect) / n) / variants)

    def design(samples: int, effect: float) -> Precision:
        n = draws if draws is not None else max(samples, 1)
        short = lambda e: e - multiplier * se_at(n, e)  # noqa: E731
        high = 1.0
        while short(high) < 0:
            high *= 2
            if high > 1e6:  # the noise grows as fast as the effect: no MDE
                return Precision(math.inf, math.inf, df=df)
        found = optimize.brentq(short, 0.0, high, xtol=1e-12) if short(0.0) < 0 else 0.0
        se = se_at(n, found)
        return Precision(se, se * stretch, df=df)

    return design


def variant_effects(cells, variants):
    """Per model x strategy x bias x variant: kind, signed BSI, each condition's answer
    variance in BSI units and answer count, from analysis.py `cell_counts` (`cells`) and
    `variant_table` (`variants`)."""
    import numpy as np
    import polars as pl

    keys = ["modelKey", "strategy", "experimentSlug", "variant"]
    sides = [
        cells.filter(pl.col("conditionIndex") == c)
        .select(*keys, "n", "k", "mean", "values")
        .rename({name: f"{name}_{side}" for name in ("n", "k", "mean", "values")})
        for c, side in ((0, "C"), (1, "T"))
    ]
    wide = (
        sides[0]
        .join(sides[1], on=keys)
        .join(
            variants.select("experimentSlug", "variant", "kind", "anchor").unique(),
            on=["experimentSlug", "variant"],
        )
    )
    rows = []
    for r in wide.iter_rows(named=True):
        n_c, n_t = r["n_C"], r["n_T"]
        if not n_c or not n_t:
            continue
        if r["kind"] == "number":
            distance = (r["anchor"] or 0.0) - r["mean_C"]
            if distance == 0 or n_c < 2 or n_t < 2:
                continue
            signed = (r["mean_T"] - r["mean_C"]) / distance
            var_c = float(np.var(r["values_C"], ddof=1)) / distance**2
            var_t = float(np.var(r["values_T"], ddof=1)) / distance**2
            noise = var_t / n_t + (1 - signed) ** 2 * var_c / n_c
        else:
            p_c, p_t = r["k_C"] / n_c, r["k_T"] / n_t
            signed, var_c, var_t = p_t - p_c, p_c * (1 - p_c), p_t * (1 - p_t)
            noise = var_c / n_c + var_t / n_t
        rows.append(
            {k: r[k] for k in (*keys, "kind")}
            | {"signed": signed, "var_c": var_c, "var_t": var_t, "noise": noise}
        )
    return pl.DataFrame(
        rows,
        schema={
            **dict.fromkeys([*keys, "kind"], pl.String),
            **dict.fromkeys(["signed", "var_c", "var_t", "noise"], pl.Float64),
        },
    )


def pooled_tau(effects) -> tuple[float, int]:
    """tau^2 pooled over bias x strategy groups (each model apart): each group's spread net of
    its noise, weighted by its variants less one. (tau, groups)."""
    total = weight = groups = 0
    for _, part in effects.group_by(["modelKey", "strategy", "experimentSlug"]):
        if part.height < 2:
            continue
        tau2 = spread_of_effects(part["signed"].to_numpy(), float(part["noise"].mean()))
        total, weight, groups = (
            total + tau2 * (part.height - 1),
            weight + part.height - 1,
            groups + 1,
        )
    return (math.sqrt(total / weight), groups) if weight else (float("nan"), 0)


def pilot_spread(effects, slug: str, model_key: str, kind: str) -> tuple[Spread, str] | None:
    """One bias's spread from the pilot's variant effects: its answer variances on this model
    (else all the pilot's models), tau pooled over the groups of its kind (same fallback)."""
    import polars as pl

    mine = effects.filter(pl.col("kind") == kind)
    same = mine.filter(pl.col("modelKey") == model_key)
    source = same if same.filter(pl.col("experimentSlug") == slug).height else mine
    bias = source.filter(pl.col("experimentSlug") == slug)
    if bias.is_empty():
        return None
    tau, groups = pooled_tau(same if same.height else mine)
    if not groups:
        tau, groups = DEFAULT_TAU, 0
    var_c, var_t = float(bias["var_c"].mean()), float(bias["var_t"].mean())
    said = (
        f"answer variance {var_c:.3g} (control), {var_t:.3g} (treatment) in BSI units over "
        f"{bias.height} variant x strategy cells; "
        + (f"tau {tau:.3g} pooled over {groups} {kind} groups" if groups else "tau 0.1 (default)")
    )
    if source is mine:
        said += " (models pooled: this one is not in the pilot)"
    return Spread(tau, var_c, var_t, kind), said


def _pilot_effects(pilot):
    if pilot is None or not any(job.kind == KIND for job in pilot.jobs.values()):
        return None
    from orchestrator.studies.bias_strength.analysis import cell_counts, variant_table

    variants = variant_table(pilot)
    return variant_effects(cell_counts(pilot, variants), variants)


def _default(kind: str) -> tuple[Spread, str]:
    if kind == "number":
        return Spread(DEFAULT_TAU, 0.25, 0.25, "number"), (
            "default: answer SD half the distance from the control's answers to the anchor, "
            "variants' effects spread by tau 0.1"
        )
    return Spread(DEFAULT_TAU, 0.25, 0.25, "choice", centred=True), (
        "default: shares either side of 0.5, variants' effects spread by tau 0.1"
    )


def power(plan, pilot, alpha: float) -> list[Planned]:
    # per (job, bias, model): per strategy, variant -> condition -> [samples, option orders]
    cells: dict[tuple, dict] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: [0, 0])))
    )
    found: dict[tuple, tuple] = {}
    for cell in plan.cells:
        if cell.job.kind != KIND or len(cell.experiment.conditions) != 2:
            continue
        key = (cell.job.id, cell.experiment.slug, cell.model_key)
        count = cells[key][cell.strategy.id][cell.variant.id][cell.condition.index]
        count[0] += cell.samples
        count[1] += 1
        found[key] = (cell.model, cell.variant.contract.kind)
    shape: dict[tuple, dict[str, tuple[int, int, int]]] = {}  # strategy -> (K, samples, orders)
    tests: dict[str, set] = defaultdict(set)  # BH runs per strategy over bias x model
    for key, by_strategy in cells.items():
        shape[key] = {}
        for strategy, by_variant in by_strategy.items():
            both = [v for v in by_variant.values() if set(v) == {0, 1}]
            k = len(both)
            samples = min((c[0] for v in both for c in v.values()), default=0)
            orders = min((c[1] for v in both for c in v.values()), default=1)
            shape[key][strategy] = (k, samples, orders)
            if k >= 2:
                tests[strategy].add(key[1:])
    effects = _pilot_effects(pilot)
    rows = []
    for key, (model, kind) in found.items():
        job, slug, model_key = key
        strategies = sorted(shape[key])
        k = min(s[0] for s in shape[key].values())
        samples = min(s[1] for s in shape[key].values())
        orders = min(s[2] for s in shape[key].values())
        m = max(len(tests[s]) for s in strategies)
        level = bh_level(alpha, m)
        spread, variance = _default(kind)
        if effects is not None:
            measured = pilot_spread(effects, slug, model_key, kind)
            if measured:
                spread, variance = measured[0], f"pilot {pilot.path.name}: {measured[1]}"
        notes = []
        design = None
        if k < 2:
            notes.append(f"{k} variant(s): the t-test over variants needs two; no test")
        else:
            design = variant_design(
                k,
                spread,
                level,
                draws=(orders if kind == "choice" else 1) if model.deterministic else None,
            )
            if model.deterministic:
                notes.append(
                    "T=0: one answer per prompt, repeated; the t-test over variants still runs, "
                    "but a variant's noise is one draw per option order whatever the samples: "
                    "only more variants help"
                )
            found_mde = mde(design, samples, level, PLANNED_POWER)
            if found_mde is not None and found_mde > 1:
                notes.append(
                    f"MDE {found_mde:.2f} is above 1 ("
                    + ("the largest share difference" if kind == "choice" else "the anchor itself")
                    + f"): with {k} variants at level {level:.3g} no plausible bias is "
                    "detectable; only more variants (or fewer tests in the correction) help"
                )
        rows.append(
            Planned(
                study=KIND,
                job=job,
                experiment=slug,
                model=model_key,
                measure="signed BSI, mean over variants",
                scale="share" if kind == "choice" else "of the distance to the anchor",
                test=TEST,
                unit="variants",
                units=k,
                samples=samples,
                alpha=level,
                correction=(
                    f"Benjamini-Hochberg over {m} bias x model tests per strategy "
                    f"({', '.join(strategies)}): planned at {alpha:g}/{m} = {level:.3g}"
                ),
                design=design,
                variance=variance,
                note="; ".join(notes),
            )
        )
    return rows

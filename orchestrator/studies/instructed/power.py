"""Power of the Instructed to Bias study's headline tests: one row per model x strategy x score,
tested as the analysis tests it (inference.py `clustered`) over value cells.

What is tested: Certainty, Certainty (shared styles), Belief Valid and Belief Invalid on
Equation 1 (treatment share of the target minus control share); Decoy Cheaper and Decoy
Expensive on the attraction measure (the same difference among the answers that chose the
target or the competitor: a treatment cell counts its answers less those that chose the
decoy), since Equation 1 on a decoy is only described. The unit is the value cell (a decoy
grid pair, a certainty prize row, a belief term family, which holds one arm only); the test
is the CR2 t with Bell-McCaffrey df, two-sided at the study's alpha, no correction; with at
most FEW_CELLS cells, some holding both arms, its p is the randomisation p over the 2^S
relabellings of the S cells holding both, which cannot go below 2/2^S (S <= 5: never
below 0.05, whatever the samples).

Variance (`Spread`): a cell's true share varies across cells (`between`, per arm), partly
shared by the cell's two arms (`shared`: it cancels where a cell holds both); within a cell,
a prompt's own share varies (`prompt`: fixed across its samples) and each answer is a draw
(`draw`: falls with samples). With answer weights w (a cell's share of its arm's answers),

    Var = sum_k,arm w^2 (between + prompt/m + draw/(m s)) - 2 shared sum_k w_k0 w_k1

over m prompts per cell and arm and s samples; CR2 estimates it nearly without bias, and df
is the Bell-McCaffrey df of the planned counts. Cells answering as one draw (the ICC: the
share of an answer's variance that is its cell's) can move only by switching, so an effect d
makes cells' differences vary by at least ICC d(1 - d) (d at least one cell, 1/K), however
alike their arms answered without it: a T=0 pilot of a content-driven model (decoy pairs
answer alike in both arms) would otherwise promise an MDE of 0. The test's own error
(se_test) is then the one at the edge of its rejection region (its variance estimate follows
the estimate where cells switch), the estimate's (se_true) the one at the effect.
A deterministic model (temperature 0, or answers scored) counts one answer per prompt (its
first sample, answers.py): s is 1 whatever is planned, so samples cannot lower its MDE.

Defaults without a pilot, shares at 0.5 (the binomial variance's maximum, whatever the
effect): deterministic, ICC 1 by value cell, arms independent (a cell answers as one draw:
a model answering by content gives every prompt built from the same values one answer);
sampling, ICC 0.5 by value cell (half an answer's variance is its cell's), arms independent,
the rest draws. Decoy treatment: 2/3 of answers kept (a random chooser's third on the decoy).

The randomisation p (an approximation, checked by simulation in
tests/test_power_instructed.py): reject where the observed |t| is among the r most extreme
of the 2^S relabellings, r/2^S < alpha (alpha' = r/2^S). For equal cells the test is the
sign-flip test of the cells' differences, whose relabelling variance sum D_k^2 holds the
effect itself: it rejects where t^2 > z^2 (S - 1)/(S - z^2), z the normal quantile at
1 - alpha'/2, which is the critical value used (S >= 7 at alpha 0.05). Where r = 2 (S = 6),
only the relabelling with every cell's difference on the observed side rejects: power is
P(all S differences > 0) = Phi(d / sd_cell)^S, written as a `Precision` with a normal
reference whose two errors reproduce that curve between 50% and 95% power (within 2.5%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
from scipy import special

from orchestrator.analysis.power import Precision


@dataclass(frozen=True)
class Spread:
    """Variance components of a 0/1 answer, per arm (control, treatment), on the share scale."""

    between: tuple[float, float]  # variance of a value cell's true share across cells
    shared: float  # covariance of a cell's two arms' true shares (cancels in a cell holding both)
    prompt: tuple[float, float]  # variance of a prompt's true share within its cell
    draw: tuple[float, float]  # variance of one answer about its prompt's share
    kept: float = 1.0  # decoy: share of treatment answers on target or competitor


def default_spread(deterministic: bool, decoy: bool) -> tuple[Spread, str]:
    """The stated defaults (module docstring) and the text that says them."""
    kept = 2 / 3 if decoy else 1.0
    said = ", 2/3 of decoy-treatment answers on target or competitor" if decoy else ""
    if deterministic:
        spread = Spread((0.25, 0.25), 0.0, (0.0, 0.0), (0.0, 0.0), kept)
        return spread, (
            "default: shares at 0.5, ICC 1 by value cell (at T=0 a cell answers as one draw), "
            "arms independent" + said
        )
    spread = Spread((0.125, 0.125), 0.0, (0.0, 0.0), (0.125, 0.125), kept)
    return spread, "default: shares at 0.5, ICC 0.5 by value cell, arms independent" + said


def _quantile(q: float) -> float:
    return float(special.ndtri(q))


def relabel_level(both: int, cells: int, alpha: float) -> float:
    """The randomisation p's real level: the largest p below alpha it can give (0: none)."""
    step = 1 / 2**both
    mirrored = both == cells  # the relabelling flipping every cell gives the same |t|
    count = math.ceil(alpha / step) - 1
    if mirrored:
        count -= count % 2
    return max(count, 0) * step


def _randomisation(se: float, both: int, level: float, alpha: float) -> Precision:
    """The randomisation p's power, as a Precision (module docstring)."""
    if level * 2**both <= 2 + 1e-9:  # r = 2: every difference must take the observed side
        half = _quantile(0.5 ** (1 / both))
        slope = (_quantile(0.8 ** (1 / both)) - half) / _quantile(0.8)
        sd_cell = se * math.sqrt(both)
        return Precision(sd_cell * half / _quantile(1 - alpha / 2), sd_cell * slope)
    z = _quantile(1 - level / 2)
    crit = z * math.sqrt((both - 1) / (both - z * z)) if both > z * z else math.inf
    t = float(special.stdtrit(both - 1, 1 - alpha / 2))
    return Precision(se * crit / t, se, df=both - 1)


def cell_design(prompts, deterministic: bool, spread: Spread, alpha: float):
    """The `Design` of one headline test: prompts (K, 2) per value cell and arm as planned
    (decoy treatment: every prompt; `spread.kept` takes the decoy's answers out)."""
    from orchestrator.analysis.cr2 import cr2_cells
    from orchestrator.studies.instructed.inference import ARMS, FEW_CELLS

    m = np.asarray(prompts, float) * [1.0, spread.kept]
    m = m[m.sum(1) > 0]
    held = m > 0
    cells, both = len(m), int(held.all(1).sum())
    weights = m / np.where(m.sum(0) > 0, m.sum(0), 1.0)
    paired = float((weights[:, 0] * weights[:, 1]).sum())
    between, prompt, draw = (
        np.asarray(x, float) for x in (spread.between, spread.prompt, spread.draw)
    )
    total = between + prompt + draw
    icc = float(np.mean(np.divide(between, total, out=np.zeros(2), where=total > 0)))
    apart = float(between.sum() - 2 * spread.shared)  # variance of a cell's true difference
    relabelled = cells <= FEW_CELLS and both > 0
    level = relabel_level(both, cells, alpha) if relabelled else alpha
    floor = (2 if both == cells else 1) / 2**both if relabelled else 0.0

    @cache
    def at(samples: int) -> tuple[float, float]:
        """(the variance at no effect, the df)."""
        s = 1 if deterministic else max(samples, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            own = np.where(held, weights**2 * (between + prompt / m + draw / (m * s)), 0.0)
        _, _, df = cr2_cells(m * s, np.zeros_like(m), ARMS, np.array([0.0, 1.0]))
        return own.sum() - 2 * spread.shared * paired, df if math.isfinite(df) else cells - 1

    def spread_at(variance: float, effect: float) -> float:
        """The estimate's SD at this effect. Cells answering as one draw move only by
        switching: an effect d switches a share d of them (at least one cell), so their
        differences vary by d(1 - d) however alike their arms answered without it (the ICC
        says how many cells answer as one draw)."""
        moved = min(max(abs(effect), 1 / cells), 1.0)
        return math.sqrt(max(variance + paired * max(icc * moved * (1 - moved) - apart, 0), 0))

    def design(samples: int, effect: float) -> Precision:
        # a share difference lies in [-1, 1]: an effect beyond it no design detects
        if cells < 2 or not held.any(0).all() or abs(effect) > 1:
            return Precision(math.inf, math.inf)
        variance, df = at(samples)
        if relabelled and level <= 0:
            se = spread_at(variance, effect)
            return Precision(se, se, df=max(cells - 1, 1), min_p=floor)
        # the test's own error is the one at the edge of its rejection region (its variance
        # estimate follows the estimate where cells switch), the estimate's at the effect
        test = _randomisation(1.0, both, level, alpha) if relabelled else Precision(1.0, 1.0, df)
        crit = test.se_test * float(special.stdtrit(test.df, 1 - alpha / 2))
        edge = 0.0
        for _ in range(60):
            edge, last = crit * spread_at(variance, edge), edge
            if abs(edge - last) < 1e-9:
                break
        se_test, se_true = edge / crit, spread_at(variance, effect)
        return replace(
            test, se_test=se_test * test.se_test, se_true=se_true * test.se_true, min_p=floor
        )

    return design


def planned_cells(plan) -> dict[tuple, dict]:
    """Per (model key, strategy, score): its job, the experiments it pools, whether the model
    is deterministic, the samples per prompt and the prompts per value cell and arm (a
    prompt is a variant: its samples, whatever option orders they are shown in, are its
    answers)."""
    from orchestrator.studies.instructed import KIND
    from orchestrator.studies.instructed.items import item_scores, shared_styles, value_cell

    found: dict[tuple, dict] = {}
    styles: dict[int, frozenset[str]] = {}  # per experiment: it reads every variant
    for c in plan.cells:
        if c.job.kind != KIND:
            continue
        e, item = c.experiment, c.variant.item or {}
        if id(e) not in styles:
            styles[id(e)] = shared_styles(e)
        for score, _ in item_scores(e.metric.label, c.condition.index, item, styles[id(e)]):
            row = found.setdefault(
                (c.model_key, c.strategy.id, score),
                {
                    "jobs": set(),
                    "experiments": {},
                    "deterministic": c.model.deterministic or c.scored,
                    "prompts": {},
                    "samples": {},
                },
            )
            row["jobs"].add(c.job.id)
            row["experiments"][e.slug] = None
            cell = (c.job.id, e.slug, value_cell(e.metric.label, item))
            prompt = (cell, c.condition.index, c.variant.id)
            row["prompts"].setdefault(cell, [set(), set()])[c.condition.index].add(prompt)
            row["samples"][prompt] = row["samples"].get(prompt, 0) + c.samples
    return found


def prompt_counts(row: dict) -> np.ndarray:
    """(K, 2) prompts per value cell and arm."""
    return np.array([[len(arm) for arm in arms] for arms in row["prompts"].values()], float)


def pilot_spread(answers, decoy: bool) -> tuple[Spread, str] | None:
    """A headline row's variance components from a pilot's answers (the study's own counting,
    analysis.scored_answers: one row per answer that counts, with its value cell `cluster`,
    `role` and `target`): per arm, the variance between value cells and, within them, between
    prompts (`variant`) and between an answer and its prompt's share (one_way); the part the
    two arms of a cell share from the spread of the cells' differences (spread_of_effects).
    None where an arm has fewer than 2 value cells."""
    import polars as pl

    from orchestrator.analysis.power import one_way, spread_of_effects

    ok = answers.filter(pl.col("status") == "ok")
    treated = ok.filter(pl.col("conditionIndex") == 1)
    on_decoy = (treated["role"] == "decoy").mean() if decoy and treated.height else 0.0
    if decoy:
        ok = ok.filter((pl.col("conditionIndex") == 0) | (pl.col("role") != "decoy"))
    ok = ok.with_columns(
        y=(pl.col("role") == pl.col("target")).cast(float),
        _cell=pl.concat_str("modelKey", "strategy", "job", "experimentSlug", "cluster"),
    ).with_columns(_prompt=pl.concat_str("_cell", "variant"))
    between, prompt, draw, means = [], [], [], []
    for arm in (0, 1):
        sub = ok.filter(pl.col("conditionIndex") == arm)
        if sub["_cell"].n_unique() < 2:
            return None
        y = sub["y"].to_numpy()
        within, across = one_way(y, sub["_cell"].to_numpy())
        draws = one_way(y, sub["_prompt"].to_numpy())[0]
        draws = 0.0 if not math.isfinite(draws) else min(draws, within)
        between.append(across)
        prompt.append(max(within - draws, 0.0))
        draw.append(draws)
        means.append(
            sub.group_by("_cell").agg(
                pl.col("y").mean().alias(f"y{arm}"),
                pl.len().alias(f"n{arm}"),
                pl.col("variant").n_unique().alias(f"m{arm}"),
            )
        )
    both = means[0].join(means[1], on="_cell")
    shared = 0.0
    if both.height >= 2:
        noise = sum(
            prompt[a] / both[f"m{a}"].to_numpy() + draw[a] / both[f"n{a}"].to_numpy()
            for a in (0, 1)
        )
        tau = spread_of_effects((both["y1"] - both["y0"]).to_numpy(), float(np.mean(noise)))
        shared = min(
            max((between[0] + between[1] - tau) / 2, 0.0), math.sqrt(between[0] * between[1])
        )
    spread = Spread(tuple(between), shared, tuple(prompt), tuple(draw), 1.0 - on_decoy)
    icc = [b / (b + p + d) if b + p + d > 0 else 0.0 for b, p, d in zip(between, prompt, draw)]
    said = (
        f"control share {ok.filter(pl.col('conditionIndex') == 0)['y'].mean():.2f}, "
        f"ICC by value cell {icc[0]:.2f} / {icc[1]:.2f} (control / treatment), "
        f"shared by a cell's arms {shared:.3g}, {ok.height} answers in {ok['_cell'].n_unique()} cells"
    )
    if decoy:
        said += f", {1 - on_decoy:.2f} of treatment answers off the decoy"
    return spread, said


ATTRACTION = (
    "attraction: target share among target-or-competitor answers, treatment minus control "
    "(Equation 1 on a decoy is described, not tested)"
)
BIAS_SCORE = "bias score (Equation 1): treatment minus control share of the target"
T_TEST = "CR2 t over value cells, Bell-McCaffrey df"
FIXED = (
    "T=0 or scored: one answer per prompt counts (its first sample), so more samples cannot "
    "help; more value cells (or prompts per cell) do"
)


def _measured(frame, key: tuple, decoy: bool, name: str) -> tuple[Spread, str] | None:
    """The pilot's components for this row: its own model and strategy, else every model of
    the pilot on this score (said so)."""
    import polars as pl

    model, strategy, score = key
    mine = frame.filter(pl.col("score") == score)
    for rows, said in (
        (mine.filter((pl.col("modelKey") == model) & (pl.col("strategy") == strategy)), ""),
        (mine, " (every model of the pilot: this one is not in it)"),
    ):
        found = pilot_spread(rows, decoy) if rows.height else None
        if found:
            return found[0], f"pilot {name}: {found[1]}{said}"
    return None


def _pilot_answers(pilot):
    from orchestrator.studies.instructed import KIND

    if pilot is None or not any(job.kind == KIND for job in pilot.jobs.values()):
        return None
    from orchestrator.studies.instructed.analysis import scored_answers

    return scored_answers(pilot, KIND).collect()


def power(plan, pilot, alpha: float) -> list:
    from orchestrator.analysis.power import Planned, mde
    from orchestrator.studies.instructed.inference import FEW_CELLS

    frame = _pilot_answers(pilot)
    planned = planned_cells(plan)
    strategies = {key[1] for key in planned}
    rows = []
    for key, row in planned.items():
        model, strategy, score = key
        decoy = score.startswith("Decoy")
        prompts = prompt_counts(row)
        deterministic = row["deterministic"]
        samples = max(row["samples"].values())
        measured = None if frame is None else _measured(frame, key, decoy, pilot.path.name)
        spread, variance = measured or default_spread(deterministic, decoy)
        cells = len(prompts)
        both = int((prompts > 0).all(1).sum())
        relabelled = cells <= FEW_CELLS and both > 0
        notes = [FIXED] if deterministic else []
        design = cell_design(prompts, deterministic, spread, alpha)
        if cells < 2 or not (prompts > 0).any(0).all():
            design, notes = None, ["fewer than 2 value cells, or an arm with none: no test"]
        elif relabelled and relabel_level(both, cells, alpha) <= 0:
            floor = (2 if both == cells else 1) / 2**both
            notes.append(
                f"{both} value cells hold both arms: the randomisation p cannot go below "
                f"{floor:.3g}, above {alpha:g}, at any samples; only more value cells help"
            )
        elif mde(design, samples, alpha, 0.8) is None:
            notes.append(
                f"no share difference (at most 1) is detected with 80% power over {cells} "
                "value cells at these variances"
            )
        jobs = sorted(row["jobs"])
        if len(jobs) > 1:
            notes.append(f"pools jobs {', '.join(jobs)} (calls counted for {jobs[0]})")
        rows.append(
            Planned(
                study="instructed",
                job=jobs[0],
                experiment=score if len(strategies) == 1 else f"{score} [{strategy}]",
                model=model,
                measure=ATTRACTION if decoy else BIAS_SCORE,
                scale="share",
                test=(
                    f"randomisation p of the CR2 t over {2**both} relabellings of value cells"
                    if relabelled
                    else T_TEST
                ),
                unit="value cells",
                units=cells,
                samples=samples,
                alpha=alpha,
                correction="",
                design=design,
                variance=variance,
                note="; ".join(notes),
                experiments=tuple(row["experiments"]),
            )
        )
    return rows

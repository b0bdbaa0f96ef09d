"""Power of the Instructed to Bias study's headline tests, one row per model x strategy x
score, tested as the analysis tests them (inference.py `clustered`) over value cells.

Tested: Certainty (and on shared styles) and Belief Valid / Invalid on Equation 1 (treatment
minus control share of the target); Decoy Cheaper / Expensive on the attraction measure (the
same among answers on target or competitor: treatment counts n - n_decoy), since Equation 1
on a decoy is only described. Unit: the value cell (decoy grid pair, certainty prize row,
belief term family, which holds one arm). Test: CR2 t, Bell-McCaffrey df, two-sided at the
study's alpha, no correction; with at most FEW_CELLS cells, some holding both arms, the
randomisation p over the 2^S relabellings of the S cells holding both, never below 2/2^S
(S <= 5: never below 0.05, whatever the samples).

Variance (`Spread`): a cell's true share varies across cells (`between`, per arm), partly
shared by its two arms (`shared`: cancels where a cell holds both); within a cell a prompt's
share varies (`prompt`, fixed over its samples) and each answer is a draw (`draw`). With w a
cell's share of its arm's answers, m prompts per cell and arm, s samples:

    Var = sum_k,arm w^2 (between + prompt/m + draw/(m s)) - 2 shared sum_k w_k0 w_k1,

which CR2 estimates nearly without bias; df: Bell-McCaffrey's for the planned counts. A
pilot's components scale with p(1 - p) (ICCs kept) from its shares to the planned ones: the
control's, and the treatment's d from it towards the side with room. Cells answering as one
draw (the ICC) move only by switching, so an effect d makes cells' differences vary by at
least ICC d(1 - d) (d at least 1/K) however alike their arms answer without it (a
content-driven T=0 pilot, decoy pairs alike in both arms, would promise an MDE of 0); the
test's error (se_test) is then the one at the edge of its rejection region, the estimate's
(se_true) the one at the effect. A deterministic model (T=0 or scored) counts one answer per
prompt (answers.py): s is 1 whatever is planned, so samples cannot lower its MDE.

Defaults without a pilot, shares at 0.5 (the binomial maximum, whatever the effect): at T=0,
ICC 1 by value cell, arms independent (a model answering by content gives every prompt of a
cell one answer); sampling, ICC 0.5, arms independent, the rest draws; decoy treatment 2/3 of
answers off the decoy (a random chooser's).

Randomisation p (approximated; tests/test_power_instructed.py simulates it): it rejects where
the observed |t| is among the r most extreme relabellings, alpha' = r/2^S < alpha. For equal
cells it is the sign-flip test of the cells' differences, whose relabelling variance sum D^2
holds the effect itself: it rejects where t^2 > z^2 (S - 1)/(S - z^2), z at 1 - alpha'/2,
the critical value used. Where r = 2 (S = 6) only every cell on the observed side rejects:
power Phi(d / sd_cell)^S, as a `Precision` whose errors follow that curve between 50% and
95% power (within 2.5%).
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
    shares: tuple[float, float] | None = None  # the pilot's, where measured (None: fixed)


def scaling(spread: Spread, effect: float) -> np.ndarray:
    """Per arm, the factor its components take at this effect: p(1 - p) at the planned shares
    (the pilot's control share, the treatment's `effect` from it towards the side with room)
    over p(1 - p) at the pilot's (1: no pilot shares, or no variance left to scale)."""
    if spread.shares is None:
        return np.ones(2)
    p0 = spread.shares[0]
    p1 = min(max(p0 + abs(effect) if p0 <= 0.5 else p0 - abs(effect), 0.0), 1.0)
    measured = np.array([p * (1 - p) for p in spread.shares])
    planned = np.array([p0 * (1 - p0), p1 * (1 - p1)])
    return np.where(measured > 0.01, planned / np.maximum(measured, 0.01), 1.0)


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


def relabel_level(both: int, cells: int, alpha: float) -> float:
    """The randomisation p's real level: the largest p below alpha it can give (0: none)."""
    step = 1 / 2**both
    mirrored = both == cells  # the relabelling flipping every cell gives the same |t|
    count = math.ceil(alpha / step) - 1
    if mirrored:
        count -= count % 2
    return max(count, 0) * step


def _randomisation(both: int, level: float, alpha: float, shift: float) -> Precision:
    """The randomisation p's power per unit of the estimate's SD, as a Precision (module
    docstring); `shift`: the effect in SDs of one cell's difference (sets the kurtosis)."""
    if level * 2**both <= 2 + 1e-9:  # r = 2: every difference must take the observed side
        half = special.ndtri(0.5 ** (1 / both))
        slope = (special.ndtri(0.8 ** (1 / both)) - half) / special.ndtri(0.8)
        cell = math.sqrt(both)
        return Precision(cell * half / special.ndtri(1 - alpha / 2), cell * slope)
    # the relabelled sum's kurtosis, -2 sum D^4 / (sum D^2)^2 with D ~ N(shift, 1), bends
    # the normal quantile (Cornish-Fisher): its tails are lighter, the more so the larger
    # the effect
    ratio = (shift**4 + 6 * shift**2 + 3) / (1 + shift**2) ** 2
    z = special.ndtri(1 - level / 2)
    z += (z**3 - 3 * z) * (-2 * ratio / both) / 24
    crit = z * math.sqrt((both - 1) / (both - z * z)) if both > z * z else math.inf
    return Precision(crit / float(special.stdtrit(both - 1, 1 - alpha / 2)), 1.0, df=both - 1)


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
    relabelled = cells <= FEW_CELLS and both > 0
    level = relabel_level(both, cells, alpha) if relabelled else alpha
    floor = (2 if both == cells else 1) / 2**both if relabelled else 0.0

    @cache
    def at(samples: int) -> tuple[np.ndarray, float]:
        """(per arm, its part of the estimate's variance at the measured shares; df)."""
        s = 1 if deterministic else max(samples, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            own = np.where(held, weights**2 * (between + prompt / m + draw / (m * s)), 0.0)
        _, _, df = cr2_cells(m * s, np.zeros_like(m), ARMS, np.array([0.0, 1.0]))
        return own.sum(0), df if math.isfinite(df) else cells - 1

    def spread_at(own: np.ndarray, effect: float) -> float:
        """The estimate's SD at this effect: each arm's components at its share there, less
        what a cell's arms share, at least the switching floor (module docstring)."""
        f = scaling(spread, effect)
        shared = spread.shared * math.sqrt(f[0] * f[1])
        apart = float((between * f).sum() - 2 * shared)  # a cell's true difference's variance
        moved = min(max(abs(effect), 1 / cells), 1.0)
        variance = float((own * f).sum()) - 2 * shared * paired
        return math.sqrt(max(variance + paired * max(icc * moved * (1 - moved) - apart, 0), 0))

    def design(samples: int, effect: float) -> Precision:
        # a share difference lies in [-1, 1]: an effect beyond it no design detects
        if cells < 2 or not held.any(0).all() or abs(effect) > 1:
            return Precision(math.inf, math.inf)
        own, df = at(samples)
        if relabelled and level <= 0:
            se = spread_at(own, effect)
            return Precision(se, se, df=max(cells - 1, 1), min_p=floor)
        # the test's own error is the one at the edge of its rejection region (its variance
        # estimate follows the estimate where cells switch), the estimate's at the effect
        se_true = spread_at(own, effect)
        test = Precision(1.0, 1.0, df)
        if relabelled:
            shift = abs(effect) / (se_true * math.sqrt(both)) if se_true > 0 else 0.0
            test = _randomisation(both, level, alpha, shift)
        crit = test.se_test * float(special.stdtrit(test.df, 1 - alpha / 2))
        edge = 0.0
        for _ in range(60):
            edge, last = crit * spread_at(own, edge), edge
            if abs(edge - last) < 1e-9:
                break
        se_test = edge / crit
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
    shares = tuple(float(ok.filter(pl.col("conditionIndex") == a)["y"].mean()) for a in (0, 1))
    spread = Spread(
        (between[0], between[1]),
        shared,
        (prompt[0], prompt[1]),
        (draw[0], draw[1]),
        1.0 - on_decoy,
        (shares[0], shares[1]),
    )
    icc = [b / (b + p + d) if b + p + d > 0 else 0.0 for b, p, d in zip(between, prompt, draw)]
    said = (
        f"shares {shares[0]:.2f} / {shares[1]:.2f} (control / treatment), "
        f"ICC by value cell {icc[0]:.2f} / {icc[1]:.2f}, "
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

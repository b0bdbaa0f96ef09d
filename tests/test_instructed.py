"""The "Instructed to Bias" study (seed 004): its templated job format, the generated datasets'
counts (the paper's Table 2) and design, stable and traceable item ids, bad input, and a
simulated campaign whose planted bias scores the analysis recovers."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.errors import UserError
from orchestrator.plan import Plan
from orchestrator.session import load_campaign, load_job
from orchestrator.studies.instructed.generate import price_text, syllogism
from orchestrator.studies.instructed.reader import job_from_templates
from tests.conftest import ROOT, write_config

JOB = ROOT / "jobs" / "instructed.json"
RAW = orjson.loads(JOB.read_bytes())
TABLE_2 = {
    "decoy-frying-pan": (96, 1152),
    "decoy-phone": (120, 1440),
    "decoy-car": (120, 1440),
    "decoy-real-estate": (96, 1152),
    "certainty": (336, 504),
    "belief": (672, 672),
}


@pytest.fixture(scope="module")
def job():
    return load_job(JOB)


def counts(job) -> dict[str, tuple[int, ...]]:
    return {e.slug: tuple(len(c.variants) for c in e.conditions) for e in job.experiments}


def items(job, slug=None):
    for e in job.experiments:
        if slug is None or e.slug == slug:
            for c in e.conditions:
                for v in c.variants:
                    yield e, c, v


def test_the_generated_counts_are_table_2(job):
    assert counts(job) == TABLE_2


def test_the_counts_follow_from_the_grids():
    """Why the counts are what they are: templates x grid rows x option orders, per condition."""
    for ds in RAW["decoy"]:
        t, p, d = len(ds["templates"]), len(ds["pairs"]), len(ds["decoys"])
        control, treatment = (
            t * p * 2,
            t * p * 2 * d * 6,
        )  # 2! orders; 2 targets x decoys x 3! orders
        assert (control, treatment) == TABLE_2[ds["slug"]]
    cert = RAW["certainty"][0]
    grid = len(cert["templates"]) * len(cert["prizes"]) * len(cert["chances"]) * 2
    styles = [s.get("conditions", ["control", "treatment"]) for s in cert["styles"]]
    assert (
        (grid * sum("control" in s for s in styles), grid * sum("treatment" in s for s in styles))
        == (3 * 7 * 4 * 2 * 2, 3 * 7 * 4 * 2 * 3)
        == TABLE_2["certainty"]
    )
    belief = RAW["belief"][0]
    per_family = 2 * 2 * 2  # valid/invalid x believable/unbelievable x premise orders
    assert (
        len(belief["templates"]) * len(belief["invented"]) * per_family,
        len(belief["templates"]) * len(belief["real"]) * per_family,
    ) == TABLE_2["belief"]


def test_ids_are_unique_and_every_answer_instruction_is_the_same(job):
    for e in job.experiments:
        ids = [v.id for _, _, v in items(job, e.slug)]
        assert len(ids) == len(set(ids))
    tails = {v.instruction.split(" one of ")[0] for _, _, v in items(job)}
    assert tails == {"End your answer with a JSON object giving your answer exactly as"}


def _plan_ids(tmp_path: Path, raw: dict, name: str) -> dict[str, str]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "instructed.json").write_bytes(orjson.dumps(raw))
    cfg = write_config(
        folder,
        f"""
        name = "i"
        jobs = ["instructed.json"]
        output_dir = "{folder / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    return {
        f"{t.cell.experiment.slug}/{t.cell.condition.index}/{t.cell.variant.id}": t.task_id
        for t in Plan(load_campaign(cfg)).tasks()
    }


def test_a_changed_template_leaves_every_other_items_task_ids_alone(tmp_path):
    changed = copy.deepcopy(RAW)
    changed["decoy"][1]["templates"][1]["text"] = "Pick one of {count} {noun}. {options}"
    changed["belief"][0]["real"][0]["a"] = "robins"  # a grid row changes too
    before, after = _plan_ids(tmp_path, RAW, "a"), _plan_ids(tmp_path, changed, "b")
    assert before.keys() == after.keys() and len(before) == sum(map(sum, TABLE_2.values()))
    moved = {k for k in before if before[k] != after[k]}
    assert moved == {k for k in before if k.startswith("decoy-phone/") and "/t2." in k} | {
        k for k in before if k.startswith("belief/1/") and ".real00." in k
    }
    assert len(moved) == 30 + 360 + 7 * 4 * 2


def test_every_item_is_rebuilt_from_its_template_and_values(job):
    templates = {
        ds["slug"]: {t["id"]: t["text"] for t in ds["templates"]}
        for kind in ("decoy", "certainty", "belief")
        for ds in RAW[kind]
    }
    by_slug = {ds["slug"]: ds for kind in ("decoy", "certainty", "belief") for ds in RAW[kind]}
    for e, c, v in items(job):
        it, ds, text = v.item, by_slug[e.slug], templates[e.slug][v.item["template"]]
        roles = it.get("shown", "").split(",")
        assert list(v.contract.roles) == (roles if roles != [""] else ["valid", "invalid"])
        if e.slug.startswith("decoy"):
            lines = " ".join(
                f"{ds['label']} {n} - price is ${price_text(it[f'{r}_price'], ds['price_step'])}, "
                f"quality rating is {it[f'{r}_quality']}."
                for n, r in enumerate(roles, 1)
            )
            rebuilt = text.format(
                count=["two", "three"][len(roles) - 2], noun=ds["noun"], options=lines
            )
        elif e.slug == "certainty":
            style = next(s for s in ds["styles"] if s["id"] == it["style"])

            def lottery(r):
                pct, prize = it[f"{r}_percent"], f"{it[f'{r}_prize']:,}"
                if pct == 100:
                    return style["certain"].format(prize=prize)
                show = (
                    (lambda x: f"{x:g}%")
                    if style["chance"] == "percent"
                    else (lambda x: f"{x / 100:g}")
                )
                return style["lottery"].format(prize=prize, chance=show(pct), rest=show(100 - pct))

            rebuilt = text.format(
                options=" ".join(f"Option {k} - {lottery(r)}." for k, r in zip("AB", roles))
            )
        else:
            family = ds["real" if it["terms"] == "real" else "invented"][it["family"]]
            assert it["c"] == family[it["form"]][0 if it["believable"] else 1]
            premises, conclusion = syllogism(it["a"], it["b"], it["c"], it["form"])
            rebuilt = text.format(
                premises=" ".join(premises[int(i)] for i in it["order"]), conclusion=conclusion
            )
        assert v.prompt.split("\n\n")[0] == rebuilt, v.id


def test_decoys_are_asymmetrically_dominated_by_the_target(job):
    n = 0
    for e, c, v in items(job):
        if e.slug.startswith("decoy") and c.index == 1:
            it = v.item
            t, k, d = (
                (it[f"{r}_price"], it[f"{r}_quality"]) for r in ("target", "competitor", "decoy")
            )
            assert t[0] <= d[0] and t[1] >= d[1] and t != d, v.id  # the target dominates the decoy
            assert k[0] > d[0] or k[1] < d[1], v.id  # the competitor does not
            assert (it["target_price"] < it["competitor_price"]) == (it["side"] == "cheaper")
            assert 60 <= min(t[1], k[1]) and max(t[1], k[1]) <= 90
            n += 1
    assert n == 5184
    shifts = {(d["price"], d["quality"]) for ds in RAW["decoy"] for d in ds["decoys"]}
    assert {p for p, _ in shifts} == {0, 0.25, 0.5} and {q for _, q in shifts} == {0, 10}
    assert any(p and q for p, q in shifts)  # price, quality, and both


def test_prices_stay_in_table_2s_ranges(job):
    ranges = {
        "decoy-frying-pan": (9.99, 179.99),
        "decoy-phone": (100, 900),
        "decoy-car": (5000, 35000),
        "decoy-real-estate": (80000, 500000),
    }
    for e, _, v in items(job):
        if e.slug in ranges:
            prices = [x for k, x in v.item.items() if k.endswith("_price")]
            assert all(ranges[e.slug][0] <= x <= ranges[e.slug][1] for x in prices), v.id


def test_the_risky_lottery_always_has_the_higher_expected_value(job):
    for _, c, v in items(job, "certainty"):
        it = v.item
        assert it["risky_prize"] * it["risky_percent"] > it["safe_prize"] * it["safe_percent"], v.id
        assert 2400 <= it["safe_prize"] < it["risky_prize"] <= 5000
        assert (it["safe_percent"] == 100) == (c.index == 1)  # sure only in treatment


def test_few_shot_words_never_appear_in_a_test_item(job):
    few = RAW["belief"][0]["few_shot_words"]
    assert len(few) >= 4
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, few)) + r")\b", re.IGNORECASE)
    assert not [v.id for _, _, v in items(job) if pattern.search(v.prompt)]


def _bad(mutate) -> UserError:
    raw = copy.deepcopy(RAW)
    mutate(raw)
    with pytest.raises(UserError) as err:
        job_from_templates(raw, Path("x.json"), "x")
    return err.value


def test_bad_job_files_are_user_errors_naming_the_field():
    def leak(raw):
        raw["belief"][0]["few_shot_words"].append(raw["belief"][0]["invented"][2]["b"])

    assert "few-shot words also in test items" in str(_bad(leak))

    def real_leak(raw):  # a real term, in an entry of two words
        raw["belief"][0]["few_shot_words"].append("big " + raw["belief"][0]["real"][0]["b"])

    assert "few-shot words also in test items" in str(_bad(real_leak))
    e = _bad(lambda raw: raw["decoy"][0]["decoys"].append({"price": 0.5, "quality": 30}))
    assert e.field == "decoy[0].pairs[0]" and "asymmetrically dominated" in str(e)
    e = _bad(lambda raw: raw["certainty"][0]["prizes"].append([3000, 2900]))
    assert e.field == "certainty[0].prizes[7]" and "expected value" in str(e)
    e = _bad(lambda raw: raw["decoy"][2]["templates"][0].update(text="Pick {colour}: {options}"))
    assert e.field == "decoy[2].templates[0].text" and "{colour}" in str(e)
    e = _bad(lambda raw: raw["decoy"][0].update(option="{label} costs ${price} ({noun.upper})"))
    assert e.field == "decoy[0].option" and "{noun.upper}" in str(e) and "{quality}" in e.fix
    e = _bad(lambda raw: raw["certainty"][0]["styles"][0].update(certain="win ${prize} for {sure}"))
    assert e.field == "certainty[0].styles[0].certain"
    e = _bad(lambda raw: raw["certainty"][0]["chances"][0].update(risky=120))
    assert "certainty[0].chances[0].risky" in (e.field or "")


def test_a_bad_job_file_exits_2_and_writes_nothing(tmp_path):
    raw = copy.deepcopy(RAW)
    raw["decoy"][0]["pairs"][0] = [50.0, 70, 40.0, 90]  # the "cheaper" option costs more
    (tmp_path / "bad.json").write_bytes(orjson.dumps(raw))
    cfg = write_config(
        tmp_path,
        f"""
        name = "bad"
        jobs = ["bad.json"]
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        """,
    )
    result = CliRunner().invoke(app, ["run", str(cfg)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 2 and "decoy[0].pairs[0]" in flat, result.output
    assert not (tmp_path / "runs").exists()


PLANTED = {
    "Decoy Cheaper": 0.7 - 0.5,
    "Decoy Expensive": 0.7 - 0.5,
    "Certainty": 0.75 - 0.25,
    "Certainty (shared styles)": 0.75 - 0.25,
    "Belief Valid": 0.8 - 0.5,
    "Belief Invalid": 0.2 - 0.5,
}


def _binomial_se(row: dict) -> float:
    """The two shares' independent binomial standard error: a yardstick, not the analysis."""
    p1, n1 = row["share_treatment"], row["n_treatment"]
    p0, n0 = row["share_control"], row["n_control"]
    return math.sqrt(p1 * (1 - p1) / n1 + p0 * (1 - p0) / n0)


@pytest.mark.slow
def test_a_simulated_campaign_recovers_the_planted_bias_scores(tmp_path):
    decoy = (
        "conditions = [{shares = {cheaper = 0.5}}, "
        "{shares = {target = 0.7, competitor = 0.25, decoy = 0.05}}]"
    )
    effects = "\n".join(
        f"[models.simulate.effects.{slug}]\n{decoy}" for slug in TABLE_2 if "decoy" in slug
    )
    cfg = write_config(
        tmp_path,
        f"""
        name = "instructed"
        jobs = ["instructed"]
        samples = 1
        seed = 4
        output_dir = "{tmp_path / "runs"}"
        [[models]]
        provider = "simulated"
        name = "sim"
        temperature = 1.0
        [models.simulate]
        parse_error_rate = 0.01
"""
        + effects
        + """
        [models.simulate.effects.certainty]
        conditions = [{shares = {safe = 0.25}}, {shares = {safe = 0.75}}]
        [models.simulate.effects.belief]
        conditions = [{shares = {valid = 0.5}}, {shares = {valid = 0.8}}]
        """.replace("\n        ", "\n"),
    )
    cli = CliRunner()
    ran = cli.invoke(app, ["run", str(cfg)])
    assert ran.exit_code == 0, ran.output
    run_dir = tmp_path / "runs" / "instructed" / "default"
    analyzed = cli.invoke(app, ["analyze", str(run_dir)])
    assert analyzed.exit_code == 0 and "Instructed to Bias: bias scores" in analyzed.output, (
        analyzed.output
    )
    scores = {
        r["score"]: r
        for r in orjson.loads((run_dir / "instructed_scores.json").read_bytes())["scores"]
    }
    assert list(scores) == list(PLANTED)
    for name, planted in PLANTED.items():
        r = scores[name]
        if name.startswith("Decoy"):
            # Equation 1 on a decoy is a description: no interval; the attraction measure
            # (the target's share among target-or-competitor answers) is the tested column
            assert r["ci_low"] is None and r["p"] is None, (name, r)
            half = 3 * _binomial_se(r)  # three standard errors: a doubled effect is not
            assert abs(r["bias_score"] - planted) < half and half < 0.1, (name, r)
            low, high = r["attraction_ci_low"], r["attraction_ci_high"]
            assert low <= 0.7 / 0.95 - 0.5 <= high and high - low < 0.2 and low > 0, (name, r)
        else:
            # within three standard errors (1.5 95%-half-widths): a doubled effect is not
            assert abs(r["bias_score"] - planted) < 1.5 * (r["ci_high"] - r["ci_low"]) / 2, r
            assert r["ci_high"] - r["ci_low"] < 0.2, (name, r)
            assert r["ci_low"] > 0 or r["ci_high"] < 0, (name, r)  # the planted effect is found
        assert (
            r["n_treatment"] + r["unparsed_treatment"]
            == {
                "Decoy Cheaper": 2592,
                "Decoy Expensive": 2592,
                "Certainty": 504,
                "Certainty (shared styles)": 336,  # the "for certain" style left out
                "Belief Valid": 168,
                "Belief Invalid": 168,
            }[name]
        )
        assert math.isclose(r["bias_score"], r["share_treatment"] - r["share_control"])
    assert scores["Decoy Cheaper"]["n_control"] + scores["Decoy Cheaper"]["unparsed_control"] == 432
    assert cli.invoke(app, ["report", str(run_dir)]).exit_code == 0
    report = (run_dir / "report" / "report.md").read_text()
    assert "## Instructed to Bias: bias scores" in report and "Belief Invalid" in report

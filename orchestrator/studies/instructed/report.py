"""The Instructed to Bias report sections: the bias scores (with the bar chart), belief-bias
accuracy, the model differences, the per-product decoy scores and the price-gap figure."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from orchestrator.studies.base import ReportPart, Section
from orchestrator.studies.instructed import plots
from orchestrator.studies.instructed.rows import accuracy_rows, did_rows, score_rows

SCORES_NOTE = (
    "Bias score (the paper's Equation 1): share of parsed answers choosing the target in "
    "treatment minus in control; > 0 is the direction of the human bias. Decoy: the target's "
    "share with the decoy against the same option's share in the pair alone (products pooled); "
    "Certainty: the safe option; Belief Valid / Invalid: the correct answer on believable valid / "
    "unbelievable invalid real-term arguments against invented-word ones. 95% CI and p: over "
    "value cells (the prompts built from the same values, in every template and option order, "
    "are one draw for a model answering by content): CR2 cluster-robust t with Bell-McCaffrey "
    "degrees of freedom, clipped to the values a difference of shares can take; with at most 12 "
    "cells, p is the randomisation p of that t over the relabellings of the cells holding both "
    "arms (it cannot go below 2/2^those cells; the interval stays the t's, so near .05 the two "
    "can disagree); where every answer in each arm is alike, the randomisation p of the score "
    "(marked exact). t (df): the paper's Student t-test (equal variances) on the 0/1 answers; "
    "p (prompts, Fisher): Fisher's exact test on every row (the t-test's p is not monotone in "
    "the counts: 11/11 against 1/10 got a smaller p than 11/11 against 0/10; it is kept in the "
    "data as p_t). Both take every prompt as independent and overstate significance when a "
    "model answers by content. † Equation 1 is option-count-biased for the decoy: the decoy "
    "adds a third option, so a respondent choosing at random scores 1/3 - 1/2 = -0.17, and a "
    "bias-free respondent answering by content got p < .002 over cells. A decoy row's Equation "
    "1 is therefore a description, with no p or interval; the tested column is the attraction "
    "measure (the same difference among the answers choosing the target or the competitor), "
    "which the figure, the overview and run comparisons use. Every p is unadjusted. A model at "
    "temperature "
    "0 and a scored answer count once per item."
)
ACCURACY_NOTE = (
    "Belief-bias accuracy on logical validity (the paper's section 6.3): share of parsed answers "
    "that name the argument's form (valid or invalid), in real words (treatment, believable and "
    "unbelievable conclusions), invented words (control) and both; 95% interval over term "
    "families (CR2 t, clipped to [0, 1]): a family's syllogisms in every template and premise "
    "order are one draw for a model answering by content."
)
DID_NOTE = (
    "Difference-in-differences (the paper's pretrained vs instruction-tuned contrast, section 5): "
    "for each pair of models in the campaign's order, the first model's bias score minus the "
    "second's, with a 95% CI and p over value cells (CR2, as the scores: both models answered "
    "the same items, and what their answers share through the items is taken in). Put the "
    "pretrained model first and its instruction-tuned version second: a negative difference is "
    "then a larger bias after instruction tuning. † Decoy: a difference of Equation-1 scores, "
    "whose option-count bias cancels only between models that choose among the three options "
    "alike: a description, with no p or interval; the attraction difference beside it, which "
    "compares the models' attraction measures, is the tested one."
)
PRODUCT_NOTE = (
    "Decoy scores per product (each its own dataset), as in the paper's Figure 5; "
    "columns as in the bias-score table. Each product has its own kinds and sizes of decoy "
    "(see the deviations): a difference between products is also a difference between decoys."
)
GAP_NOTE = (
    "Decoy Cheaper score (Equation 1, option-count-biased †: -0.17 for a random chooser) per "
    "grid pair (the paper's Figure 6) against the pair's price gap "
    "(the competitor's price minus the target's); each point is one pair's treatment items against "
    "its control items. A pair is one value cell and Equation 1 on a decoy is a description, so "
    "the points have no interval. Every pair and both "
    "decoy scores are in instructed_price_gap.csv."
)


def report(tables: dict[str, pl.DataFrame], out_dir: Path) -> ReportPart:
    scores = tables["instructed_scores"]
    part = ReportPart()
    part.sections.append(
        Section(
            "Instructed to Bias: bias scores",
            SCORES_NOTE,
            score_rows(scores),
            (("instructed-scores", plots.scores_plot(scores, out_dir / "instructed-scores.png")),),
        )
    )
    accuracy = tables.get("instructed_accuracy")
    if accuracy is not None and accuracy.height:
        part.sections.append(
            Section(
                "Instructed to Bias: belief-bias accuracy", ACCURACY_NOTE, accuracy_rows(accuracy)
            )
        )
    did = tables.get("instructed_did")
    if did is not None and did.height:
        part.sections.append(
            Section("Instructed to Bias: differences between models", DID_NOTE, did_rows(did))
        )
    products = tables.get("instructed_products")
    if products is not None and products.height:
        part.sections.append(
            Section(
                "Instructed to Bias: decoy scores per product",
                PRODUCT_NOTE,
                score_rows(products, (("product", "experimentSlug"),)),
            )
        )
    pairs = tables.get("instructed_price_gap")
    if pairs is not None and pairs.filter(pl.col("score") == plots.GAP_SCORE).height:
        part.sections.append(
            Section(
                "Instructed to Bias: decoy score by price gap",
                GAP_NOTE,
                [],
                (
                    (
                        "instructed-price-gap",
                        plots.gap_plot(pairs, out_dir / "instructed-price-gap.png"),
                    ),
                ),
            )
        )
    return part

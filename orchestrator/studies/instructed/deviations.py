"""Where the Instructed to Bias analysis departs from the seed-004 paper, and why."""

from orchestrator.studies.base import Deviation

DEVIATIONS = (
    Deviation(
        "The templates, products, prices, lotteries and syllogisms are written for this tool "
        "(jobs/instructed.json), to the paper's design and Table 2 counts; the belief "
        "items are not Dasgupta et al.'s.",
        "The paper's generated datasets are not part of its text; its bias scores are not "
        "expected to be reproduced to the digit on other items.",
    ),
    Deviation(
        "Each score has a Newcombe 95% CI with the pooled z-test's p beside the paper's Student "
        "t-test (t, df, p) on the 0/1 answers; every p is unadjusted, as in the paper.",
        "The t-test on 0/1 answers is a large-sample approximation that says nothing about a "
        "share near 0 or 1; Newcombe's interval keeps its level there. Both are shown so the "
        "paper's test can be read as it reported it.",
    ),
    Deviation(
        "Shares are among parsed answers; parse failures and refusals are counted beside them.",
        "Scored by likelihood, the paper's pretrained models always choose; a generated answer "
        "may name no option, and counting it as 'not the target' would move the score with the "
        "parse-failure rate.",
    ),
    Deviation(
        "Decoy Cheaper and Decoy Expensive pool the four products' answers (each product "
        "weighted by its item count); the per-product scores are in their own table.",
        "The paper averages per-product scores for some models (its ** mark) without giving "
        "the weights; pooling uses every answer once, and the products' counts are within 25%.",
    ),
    Deviation(
        "The decoy scores also get the attraction measure: the target's share among target-or-"
        "competitor answers, the decoy answers left out.",
        "Equation 1 sets a 3-option treatment against a 2-option control: a respondent choosing "
        "at random scores 1/3 - 1/2 = -0.17 with no decoy effect at all.",
    ),
    Deviation(
        "The difference-in-differences between two models takes their bias scores as "
        "independent samples (Agresti-Caffo variances added, normal CI, z-test), for every pair "
        "of models in the campaign's order.",
        "The paper cites the method (Dimick and Ryan) without its variance. Both models answer "
        "the same items, so item effects they share make this conservative, not liberal; the "
        "Agresti-Caffo variance is not 0 where every answer of a condition is alike.",
    ),
    Deviation(
        "Scored answers: the prompt is the item's text and a line 'Answer:', each option is "
        "scored as ' ' + its label ('Brand 2', 'Option A', 'valid'), the premise is 'Answer:' "
        "alone, and the scores are summed token log-probabilities.",
        "The paper names DC-PMI and the premise but not its candidate strings; for belief bias "
        "its Table 1 shows 'This argument is valid.', here the label alone, the same candidate "
        "as a generating model names.",
    ),
    Deviation(
        "A model at temperature 0, and any answer chosen by scoring the candidates, counts once "
        "per item, whatever the samples.",
        "Its repeated answers are one draw: counted as many, they would shrink every interval "
        "by the square root of the samples for nothing.",
    ),
    Deviation(
        "The price-range analysis (Figure 6) plots each grid pair's Decoy Cheaper score against "
        "its price gap, for every product, not against the target price of real estate alone.",
        "The paper reads the target price as a stand-in for the gap, which grows with it in its "
        "data; in this grid the gap does not always grow with the target price (phones).",
    ),
    Deviation(
        "Belief accuracy counts every belief item (both forms, believable and unbelievable, "
        "real and invented words), shown per word set.",
        "The paper reports accuracy 'on the logical reasoning aspect' without saying which items "
        "count.",
    ),
)

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
        "Each score's 95% CI and p are over value cells (the prompts built from the same values "
        "in every template and option order): the pooled score with its CR2 cluster-robust "
        "variance and a t reference with Bell-McCaffrey degrees of freedom; the paper's Student "
        "t-test (t, df, p) on the 0/1 answers is shown beside it; every p is unadjusted, as in "
        "the paper.",
        "At T=0, and always when answers are scored, a model answering by content gives one "
        "answer to every prompt of a value cell: they are one draw. In the simulation of "
        "tests/test_instructed_null.py (a respondent with no bias answering by content, 2,000 "
        "tests), tests over prompts called 40% significant (53-57% of Certainty and Belief "
        "tests, 17-19% of attraction tests), the tests over value cells 5.2%. Where every answer in each arm is "
        "alike, p is the exact "
        "randomisation p over the cells, and the t-test's p is Fisher's exact test's, where "
        "either would otherwise read 0.",
    ),
    Deviation(
        "With at most 12 value cells (Certainty has 7) p is the randomisation p of the CR2 t "
        "over every relabelling within the cells holding both arms, not the t reference's; "
        "intervals (from the t reference) are "
        "clipped to the values a difference of shares can take. The p over prompts the tables "
        "show is Fisher's exact test's on every row; the paper's t-test p stays in the data "
        "(p_t).",
        "With 7 cells the t reference's tail is not to be trusted: one answer flipped in one "
        "of 7 alike cells took p from the exact 2/2^7 = 0.016 to 5e-14, with an interval past "
        "1. The t-test's p is not monotone in the counts: 11/11 against 1/10 got 1.3e-8, "
        "stronger than 11/11 against 0/10 (Fisher 2.8e-6).",
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
        "competitor answers, the decoy answers left out; it is the tested column. Equation 1 "
        "stays in the table as a description, with no p or interval (the paper tests it), in "
        "the scores and between models; the figure, the overview and run comparisons show the "
        "attraction measure.",
        "Equation 1 sets a 3-option treatment against a 2-option control: a respondent choosing "
        "at random scores 1/3 - 1/2 = -0.17 with no decoy effect at all (marked † in the "
        "table), and a bias-free respondent answering by content got p 6e-5 to 0.002 over "
        "cells (the paper's t-test: 1.6e-17 to 1.5e-5): a null no such respondent meets. A "
        "3-option arm and a 2-option arm are not exchangeable either, which a randomisation p "
        "assumes.",
    ),
    Deviation(
        "The difference-in-differences between two models is tested over value cells like the "
        "scores (CR2 on both models' answers, each cell holding both models in both arms), for "
        "every pair of models in the campaign's order.",
        "The paper cites the method (Dimick and Ryan) without its variance. Both models answer "
        "the same items: what their answers share through the items is taken in, where adding "
        "two variances over prompts was not conservative (each took every prompt as a draw).",
    ),
    Deviation(
        "Certainty pools every lottery style, one of which ('for certain') only treatment has; "
        "Certainty (shared styles) gives the score on the styles both arms read beside it.",
        "The sure prize is worded differently in that style, so the pooled score mixes a wording "
        "the control never reads into the certainty effect.",
    ),
    Deviation(
        "The products' decoys differ in kind and size: the frying pan and the car get a dearer "
        "copy and a worse copy of the target, the phone and the real estate a dearer copy and "
        "one both dearer and worse, at markups of 25% or 50% that differ between products.",
        "Differences between the products' decoy scores are confounded with the kind of decoy: "
        "read them as differences between product-and-decoy designs, not between products.",
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

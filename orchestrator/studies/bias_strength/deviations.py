"""Where the Bias Strength Index analysis departs from the seed-001 paper, and why."""

from orchestrator.studies.base import Deviation

DEVIATIONS = (
    Deviation(
        "Decoy: scored as the attraction effect, the target's share among target-or-competitor "
        "answers (decoy answers counted apart), not p_T - p_C over all answers.",
        "The control shows 2 options and the treatment 3, so a respondent choosing at random "
        "scores 1/3 - 1/2 and |BSI| = 0.17 with no bias at all.",
    ),
    Deviation(
        "Framing: the control describes each option in full and the treatment in the loss frame "
        "only, where the paper sets a gain frame against a loss frame.",
        "The built-in job's choice; its BSI is the shift from a neutral description to the loss "
        "frame, not comparable with the paper's gain-vs-loss values.",
    ),
    Deviation(
        "The signed BSI is the headline and what the variant-level t-test tests; |BSI| (the "
        "paper's) is shown beside it.",
        "|BSI| is above 0 by construction whenever answers are noisy, and an effect against the "
        "prediction is not a bias.",
    ),
    Deviation(
        "The trial-level test is a random-slope model across variants (each variant's log odds "
        "ratio or anchor-normalised shift, REML weights, CR2 errors with Bell-McCaffrey degrees "
        "of freedom), not the paper's random-intercept GLMM.",
        "With a random intercept only, effects that differ across variants with mean 0 were "
        "called significant in 33-36% (choices) and 61% (numbers) of nulls; this model holds "
        "about 5%. Its counts of significant effects are not comparable with the paper's Table 5.",
    ),
    Deviation(
        "The robust cross-check uses CR2 clustered errors with Bell-McCaffrey degrees of freedom.",
        "Cluster-robust errors with 3-5 clusters and a normal reference gave 12-18% false "
        "positives under a pure null.",
    ),
    Deviation(
        "Choice options are shown in every order (a Latin square beyond three) and scored by role.",
        "A first-position habit otherwise reads as a bias.",
    ),
    Deviation(
        "σ_sys is unknown (not 0) for a bias with one variant, and so is σ_tot.",
        "One variant says nothing about wording.",
    ),
    Deviation(
        "Debiasing: each strategy's change in signed BSI from the baseline gets a bootstrap CI "
        "(variants held fixed); the paper's relative reduction is shown only where that CI "
        "excludes 0, and at T=0 there is no CI.",
        "Noise alone printed reductions from -250% to +49%.",
    ),
    Deviation(
        "Numbers also get a robust signed BSI beside the paper's (per variant the "
        "Hodges-Lehmann shift, with the Brunner-Munzel test's 95% CI, over anchor - median_C, "
        "per bias their median with an "
        "order-statistic interval, below 95% for fewer than 6 variants), a mark when one "
        "variant carries the mean BSI or two answers a variant's mean shift, and the count of "
        "answers outside a variant's plausibleRange (our job format), kept in the BSI.",
        "The BSI divides a difference of means: one runaway answer (1.5e22 days) makes it "
        "astronomical, and its bootstrap σ_stat with it, with nothing to say why.",
    ),
)

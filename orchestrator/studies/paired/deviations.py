"""Where the paired analysis departs from the seed-000 benchmark spec, and why."""

from orchestrator.studies.base import Deviation

DEVIATIONS = (
    Deviation(
        "A model at temperature 0 is planned the spec's deterministicMinimumSamplesPerCondition "
        "unless samples are set, and its rows show the effect without CI or p (flagged).",
        "Repeated answers at T=0 are one draw; an interval or a test counting them as n "
        "independent samples would claim a certainty they do not have (20/20 vs 0/20 would "
        "get p = 2.5e-10).",
    ),
    Deviation(
        "A choice experiment whose conditions list different options (the decoy menu: three "
        "options beside two) is also read among the options both list (attraction effect), "
        "flagged beside the spec's share difference, which stays the headline.",
        "The spec's share falls with the number of options alone (1/2 to 1/3 for a respondent "
        "choosing at random). The options are shown in the spec's fixed order, so a position "
        "habit can move both measures; the spec defines no counterbalancing.",
    ),
    Deviation(
        "The spec names no test: means use Welch's t, shares Newcombe's interval beside the "
        "pooled z-test's p; every p is unadjusted.",
        "Welch needs no equal variances; Newcombe's hybrid score interval keeps its level near "
        "0 and 1 where a Wald interval does not.",
    ),
    Deviation(
        "Numbers also get a robust shift beside the spec's mean difference, which stays the "
        "headline: the Hodges-Lehmann estimate with the Brunner-Munzel p and, as its 95% CI, "
        "the shifts that test does not reject, a flag when leaving out two answers moves the "
        "mean by more than the width of its CI (and by a quarter of its size or of the answers' "
        "SD), and the count of answers outside an experiment's plausibleRange (our extension "
        "of the job format), kept in the mean.",
        "One answer of 1.5e22 to a price question turned the anchoring effect into -1.5e20 "
        "(CI +-4.6e20) with no word of why; the spec's mean is kept, so the spec's number can "
        "still be read and compared. Brunner-Munzel rather than the Moses CI and Mann-Whitney "
        "p: those assume a pure shift, and where anchoring narrows the treated answers (equal "
        "medians, SD 4 against 1) they covered 0 in 83% and rejected in 16% of runs.",
    ),
)

"""Where the judge-history analysis departs from the seed-002 preregistration, and why."""

from orchestrator.studies.base import Deviation

DEVIATIONS = (
    Deviation(
        "Correction harm is counted over all tasks (anchored mean farther from gold than the "
        "blind mean, beside nearer and tied), not as a rate among tasks where the blind mean "
        "is at least as close to gold.",
        "That set is chosen by the outcome itself: the rate works out to farther / (farther + "
        "tied), 100% whenever no task ties, whatever the anchoring.",
    ),
    Deviation(
        "The gold-signed pull, sign(prior - gold) x (anchor - blind), is shown with the same "
        "interval and test beside the preregistered headline.",
        "The preregistered pull takes its sign from the noisy blind mean it measures from, so "
        "it is biased upward with no anchoring where blind means sit near the prior.",
    ),
    Deviation(
        "Anchor vs framing is also shown gold-signed, sign(prior - gold) x (anchor - framing), "
        "beside the preregistered secondary outcome.",
        "The preregistered version takes its sign from the noisy framing mean, so it is biased "
        "upward the same way where framing means sit near the prior.",
    ),
    Deviation(
        "Intervals over tasks: a t-interval for the mean and the order-statistic interval for "
        "the median, instead of a percentile bootstrap.",
        "Over 8 tasks the percentile bootstrap covered 85-89% for a nominal 95%.",
    ),
    Deviation(
        "The verdict flip rate is the published scorer's (the verdict of each task's mean "
        "score), with the count from majority verdicts beside it.",
        "So results compare with published runs.",
    ),
)

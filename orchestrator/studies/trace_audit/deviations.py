"""Where the trace audit departs from seed 003 (the bias-audit prompt and its harness text), and
why."""

from orchestrator.studies.base import Deviation

DEVIATIONS = (
    Deviation(
        "The golden set's labels are one author's (jobs/trace-audit-golden.jsonl, 64 traces "
        "written for this tool), not the human annotations of reviewers the seed asks to "
        "calibrate against, and no second annotator checked them.",
        "No annotated set of reasoning traces ships with the seed. The kappas and the gate "
        "measure agreement with this author's reading, with no inter-annotator agreement to "
        "set them against; the set's known limits are in GOLDEN.md.",
    ),
    Deviation(
        "The output schema validated is the prompt's own (scores 1-5 per bias, an overall "
        "1-5 score, a verbatim evidence quote, a critical flag), not the harness text's (a "
        "0-1 overall risk score, a low / medium / high severity per flag, step citations); each "
        "quote's step index in the trace stands for its step citation.",
        "The seed describes two schemas; the judge is told to answer in the prompt's, so that "
        "is the one it can be held to. Severity has no counterpart: a score of 1 (drives the "
        "conclusion) or 2 (present) is what there is.",
    ),
    Deviation(
        "The source evidence the model was given is listed under the task context in the "
        "prompt ('Source evidence the model was given: ...').",
        "The seed's template has no place for the evidence its harness passes; without it "
        "the judge could not compare the reasoning with the facts, as the seed requires.",
    ),
    Deviation(
        "There is no audit_bias(trace, context, evidence) -> BiasAuditResult function raising "
        "EscalationRequired: the audit is an engine routine, and a trace that fails validation "
        "twice is recorded with the disposition `escalated` and queued for `orchestrator "
        "review`.",
        "The engine owns calls, retries, rate limits, resume and budget; an exception would "
        "stop a batch at the first escalation, while a recorded disposition keeps every paid "
        "output on record and lets the queue resume.",
    ),
    Deviation(
        "The regression gate is a test, not the literal rule: a golden trace caught in the "
        "baseline and missed now fails it only when the losses outnumber the gains beyond "
        "judge noise (exact one-sided McNemar per bias), or when a bias the baseline caught on "
        "3 or more traces is caught on none; a mean shift fails when a paired t-test finds it "
        "and it is beyond --tolerance; Holm over the 8 tests holds false alarms to --alpha.",
        "Taken literally ('failing the pipeline if previously-caught biases are missed') the "
        "gate failed an unchanged judge re-audited with independent noise in 62% of simulated "
        "re-audits of the golden set (76% with escalations); the test failed none of 1000, "
        "and still failed a judge that stopped catching a bias every time. The flipped traces "
        "are listed, to be audited again.",
    ),
    Deviation(
        "The default judge is `local` (SmolLM2-135M, no key); the seed advises a strong "
        "model (Claude 3.5 Sonnet, GPT-4o or equivalent) and warns against small ones.",
        "The tool must run without a key or a network; such a judge escalates most traces, "
        "which the report counts. `--judge PRESET/NAME` names a strong model.",
    ),
)

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
        "The regression gate is a set of tests, not the literal rule: per bias, an exact "
        "one-sided sign-flip test of the reference-flagged traces' paired scores (higher now: "
        "caught less) fails it when significant with more catches lost than gained, a bias "
        "caught on none now included; a mean shift fails when a paired t-test finds it and it "
        "is beyond --tolerance; each family is Holm-adjusted, 0.8 of --alpha to the catch tests, "
        "0.15 to the shift tests and 0.05 to a test of escalating more. An escalated trace is "
        "neither a catch nor a miss: it is left out of the catches and listed. A bias no longer "
        "caught on too few traces for the test, or with nothing to compare, is a warning.",
        "Taken literally ('failing the pipeline if previously-caught biases are missed') the "
        "gate failed an unchanged judge re-audited with independent noise in 62% of simulated "
        "re-audits of the golden set (76% with escalations). The tests hold every rule inside "
        "--alpha: the earlier floor rule (a bias caught on 3 or more baseline traces and on none "
        "now failed whatever the p) and escalations counted as misses failed an unchanged judge "
        "that catches a flagged trace with chance 0.15 in 6-14% of re-audits, one that escalates "
        "80% of traces in 18-19%; the tests fail them under 2% (tests/"
        "test_trace_audit_gate_alpha.py), and still fail a judge that stopped catching a bias "
        "on the golden set every time. An escalation reaches a person, as the seed routes it. "
        "What 'shift unexpectedly' means is learned where the judge's whole runs drift "
        "(--baseline-again, two or more re-audits by the baseline's judge): at a run-to-run SD "
        "of 0.2 the fixed tolerance 0.5 failed an unchanged judge in 20% of re-audits, the "
        "learned one in under 2%. The flipped traces are listed, to be audited again alone.",
    ),
    Deviation(
        "`--context none` audits a run's trace with no task context at all (and `swapped` "
        "with none where a middle condition has no mirror, marked 'none (no mirror)'), "
        "though the seed says a trace with neither evidence nor context is not to be audited.",
        "It is a control arm, not an audit to act on: it shows how much of a difference "
        "between conditions the judge reads from the context rather than the reasoning. The "
        "guard still applies to every `own` audit.",
    ),
    Deviation(
        "The default judge is `local` (SmolLM2-135M, no key); the seed advises a strong "
        "model (Claude 3.5 Sonnet, GPT-4o or equivalent) and warns against small ones.",
        "The tool must run without a key or a network; such a judge escalates most traces, "
        "which the report counts. `--judge PRESET/NAME` names a strong model.",
    ),
)

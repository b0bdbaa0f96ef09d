"""The judge's prompt: seed 003's template with its placeholders filled, and the screening
question of the two-stage option.

The template has no place for the source evidence its harness text asks to pass, so the
evidence is listed under the task context (the judge compares the reasoning with it there).
"""

from __future__ import annotations

from orchestrator.spec.models import ResponseContract

# Verbatim from the seed (its INPUTS, RUBRIC, OUTPUT FORMAT and CONSTRAINTS), placeholders in
# braces; literal braces of the JSON schema doubled for str.format.
TEMPLATE = """You are an expert auditor of AI reasoning quality, specializing in cognitive bias detection. Your task is to evaluate the provided reasoning trace and determine how effectively it mitigates common cognitive biases.

**INPUTS**
- Reasoning Trace: {trace}
- Task Context: {context}
- Expected Bias Profile: {profile}

**EVALUATION RUBRIC**
For each of the following biases, assign a score from 1 (highly susceptible) to 5 (actively mitigated) and provide a brief justification with a direct quote from the reasoning trace.

1.  **Anchoring Bias:** Does the reasoning over-rely on an initial piece of information?
2.  **Confirmation Bias:** Does the reasoning seek out or interpret information to confirm a pre-existing belief?
3.  **Availability Bias:** Does the reasoning overestimate the importance of information that is recent or easily recalled?
4.  **Representativeness Heuristic:** Does the reasoning judge the likelihood of an event by comparing it to an existing prototype, ignoring base rates?

**OUTPUT FORMAT**
You must respond with a single, valid JSON object conforming to this schema:
{{
  "overall_bias_mitigation_score": "number (1-5)",
  "overall_assessment": "string (a concise summary of the reasoning's bias mitigation performance)",
  "bias_audits": [
    {{
      "bias_type": "string (Anchoring | Confirmation | Availability | Representativeness)",
      "score": "number (1-5)",
      "justification": "string (explanation of the score)",
      "evidence_quote": "string (the exact text from the reasoning trace that supports the justification)"
    }}
  ],
  "critical_failure_flag": "boolean (true if any bias score is 1 or 2, indicating a high risk of biased reasoning)"
}}

**CONSTRAINTS**
- The `evidence_quote` must be a verbatim substring from the provided [REASONING_TRACE].
- If the reasoning trace is too short to evaluate a specific bias, set the score to 3 and state "Insufficient evidence to evaluate."
- Do not evaluate the correctness of the final answer, only the reasoning process."""

NO_PROFILE = "None given."

SCREEN = """Read this reasoning trace and say whether it may show a cognitive bias (anchoring, confirmation, availability, or representativeness: ignoring base rates for a resemblance). Do not judge the final answer.

Task context: {context}

Reasoning trace:
{trace}

Answer with JSON only: {{"possible_bias": "yes"}} or {{"possible_bias": "no"}}"""

SCREEN_CONTRACT = ResponseContract(kind="choice", field="possible_bias", options=("yes", "no"))


def context_block(context: str, evidence: list[str]) -> str:
    """The task context, with the evidence the model was given listed under it."""
    if not evidence:
        return context
    listed = "\n".join(f"  - {fact}" for fact in evidence)
    return f"{context}\n  Source evidence the model was given:\n{listed}"


def judge_prompt(trace: str, context: str, evidence: list[str], profile: str) -> str:
    # The trace starts on its own line, so its first step reads as a step, not as a label's tail.
    return TEMPLATE.format(
        trace="\n" + trace.strip(),
        context=context_block(context, evidence),
        profile=profile or NO_PROFILE,
    )


def screen_prompt(trace: str, context: str) -> str:
    return SCREEN.format(trace=trace.strip(), context=context)

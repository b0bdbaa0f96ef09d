"""The reasoning-trace bias audit (seed 003): an LLM judge auditing a chain-of-thought trace for
anchoring, confirmation, availability and representativeness, with strict validation of its
answer (validate.py). Being built: the audit command, escalation, review, calibration and the
gate follow (issue 14)."""

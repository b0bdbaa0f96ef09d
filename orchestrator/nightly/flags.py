"""The kinds of finding `compare` flags (light to import: the command line lists them)."""

FLAGS = {
    "effect_changed": "an effect changed (q < 0.05, Benjamini-Hochberg across the comparison)",
    "sign_flip": "an effect significant in both runs with opposite signs",
    "newly_significant": "an effect absent before is there now, and its change is significant",
    "vanished": "an effect there before is absent now, and its change is significant",
    "parse_error_rate": "the share of answers that could not be parsed changed (q < 0.05)",
    "refusal_rate": "the share of refusals changed (q < 0.05)",
    "served_model": "the model string the provider says it served changed",
    "fingerprint": "the provider's system fingerprint changed",
    "plan_changed": "the runs' plans differ: only what both have is compared",
}

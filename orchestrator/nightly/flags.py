"""The kinds of finding `compare` flags (light to import: the command line lists them)."""

FLAGS = {
    "effect_changed": "an effect changed (q < 0.05, Benjamini-Hochberg across the comparison)",
    "sign_flip": "an effect significant in both runs with opposite signs, its change significant "
    "(or, with no test possible, of opposite signs)",
    "newly_significant": "an effect absent before is there now, and its change is significant",
    "vanished": "an effect there before is absent now, and its change is significant",
    "parse_error_rate": "the share of answers that could not be parsed changed (q < 0.05)",
    "refusal_rate": "the share of refusals changed (q < 0.05)",
    "untested_change": "an effect changed where no test is possible (a model at temperature 0, "
    "or no spread in either run)",
    "served_model": "the provider named a model string it had not named in the earlier run",
    "fingerprint": "the provider named a system fingerprint it had not named in the earlier run",
    "incomplete": "a run has tasks without a result (still running, or cut short): its effects "
    "are part of a night",
    "plan_changed": "the runs' plans differ: only what both have is compared",
}

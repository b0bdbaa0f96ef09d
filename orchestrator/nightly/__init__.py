"""Nightly re-runs: runs named by date, the `latest` pointer, schedules, history, run-to-run
comparison and trends. Everything here reads run folders; nothing calls a model."""

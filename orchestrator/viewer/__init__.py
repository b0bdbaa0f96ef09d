"""`orchestrator view`: a local page over a run's results (server.py), read with polars (data.py)."""

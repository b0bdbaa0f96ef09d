"""Analysis of a run's results: reads the run directory, never calls a model."""

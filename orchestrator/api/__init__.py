"""The Python API: the same library the command line is a layer over, for scripts and notebooks.

    import orchestrator

    run = orchestrator.run("campaign.toml", samples=5)   # blocks; works inside Jupyter too
    run.results()                                        # a polars DataFrame, one row per task
    run.effects()                                        # effects with CIs and p-values

These names are the public API (docs/python-api.md); everything else in the package may change.
"""

from orchestrator.api.config import Campaign, Model, load_campaign
from orchestrator.api.running import arun, run
from orchestrator.api.runs import Run, load
from orchestrator.errors import UserError

__all__ = ["Campaign", "Model", "Run", "UserError", "arun", "load", "load_campaign", "run"]

"""bias-orchestrator: cognitive-bias benchmark campaigns against language models."""

# The one place the version is written: the package's metadata (pyproject.toml), the manifests'
# "software" field and `orchestrator --version` all read it. CHANGELOG.md says what changed.
__version__ = "0.2.0"

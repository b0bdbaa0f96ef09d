"""The batch client of each protocol, picked by the model's provider (the clients build on
wire.py, so the choice lives here rather than beside them)."""

from __future__ import annotations

from orchestrator.batch.anthropic import AnthropicBatch
from orchestrator.batch.api import BatchAPI
from orchestrator.batch.gemini import GeminiBatch
from orchestrator.batch.openai import OpenAIBatch
from orchestrator.providers.http import HTTPProvider


def batch_api(provider: HTTPProvider) -> BatchAPI:
    """The batch client of the provider's protocol (openai, anthropic, gemini)."""
    kind = provider.model.provider
    if kind == "openai":
        return OpenAIBatch(provider)  # type: ignore[arg-type]
    if kind == "anthropic":
        return AnthropicBatch(provider)  # type: ignore[arg-type]
    if kind == "gemini":
        return GeminiBatch(provider)  # type: ignore[arg-type]
    raise ValueError(f"provider '{kind}' has no batch API")

"""Provider name -> implementation."""
from __future__ import annotations

from orchestrator.providers.base import Provider
from orchestrator.spec.campaign import ModelConfig


def make_provider(model: ModelConfig, max_connections: int = 64) -> Provider:
    if model.provider == "openai":
        from orchestrator.providers.openai import OpenAIProvider
        return OpenAIProvider(model, max_connections=max_connections)
    if model.provider == "simulated":
        from orchestrator.providers.simulated import SimulatedProvider
        return SimulatedProvider(model)
    raise ValueError(f"unknown provider {model.provider}")  # config validation prevents this

"""Provider name -> implementation."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.providers.base import Provider
from orchestrator.spec.campaign import ModelConfig
from orchestrator.spec.limits import LimitConfig


def make_provider(
    model: ModelConfig,
    limit: LimitConfig,
    run_id: str = "",
    say: Callable[[str], None] | None = None,
) -> Provider:
    """A provider for the model, honouring its limit key's in-flight cap and attempt timeout
    (the run id only seeds the simulated respondent's draws and drift). A model with several
    `base_urls` gets one client per server, behind an endpoint pool; `say` tells the user what
    happens to its endpoints and replicas."""
    if model.base_urls:
        from orchestrator.providers.pool import EndpointPool

        single = model.model_copy(update={"base_urls": None})
        return EndpointPool(
            model.label,
            [
                (
                    url,
                    make_provider(single.model_copy(update={"base_url": url}), limit, run_id, say),
                )
                for url in model.base_urls
            ],
            say,
        )
    if model.provider == "openai":
        from orchestrator.providers.openai import OpenAIProvider

        return OpenAIProvider(
            model, max_connections=limit.max_in_flight, timeout_s=limit.timeout_s, say=say
        )
    if model.provider == "anthropic":
        from orchestrator.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            model, max_connections=limit.max_in_flight, timeout_s=limit.timeout_s
        )
    if model.provider == "gemini":
        from orchestrator.providers.gemini import GeminiProvider

        return GeminiProvider(model, max_connections=limit.max_in_flight, timeout_s=limit.timeout_s)
    if model.provider == "local":
        from orchestrator.providers.local import LocalProvider

        return LocalProvider(model, limit, say)
    if model.provider == "simulated":
        from orchestrator.providers.simulated import SimulatedProvider

        return SimulatedProvider(model, run_id)
    raise ValueError(f"unknown provider {model.provider}")  # config validation prevents this

"""The campaign config (TOML): which jobs, on which models, how many samples, at what limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from orchestrator.pricing import Price
from orchestrator.spec.identity import identity_key, is_deterministic
from orchestrator.spec.limits import LimitConfig
from orchestrator.spec.models import Job
from orchestrator.spec.provider_checks import BATCH_PROVIDERS, PROVIDERS, model_problems
from orchestrator.spec.server import LocalServerConfig
from orchestrator.spec.simulate import SimulateConfig

DEFAULT_URLS = {
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}


class Strict(BaseModel):
    # Strict types: `samples = true` or `temperature = "0.7"` is a mistake, not 1 or 0.7.
    model_config = ConfigDict(extra="forbid", strict=True)


class ModelConfig(Strict):
    """A model (`[[models]]`; also `[extractor]` and `[screener]`). What defines its answers
    (its identity) is part of every task id; keys are read from the environment only."""

    provider: str | None = Field(
        default=None,
        description="Wire protocol: openai (any OpenAI-compatible server), anthropic, gemini, "
        "local (llama.cpp) or simulated; or take it from a preset.",
    )
    preset: str | None = Field(
        default=None,
        description="A name from configs/presets.toml (groq, together, vllm, ...): fills in "
        "provider, URL and key variable; paced under its own limit key.",
    )
    price: Price | None = Field(
        default=None,
        description="USD per million tokens, `{input = ..., output = ...}`; default from the "
        "price table.",
    )
    name: str | None = Field(
        default=None, min_length=1, description="The model's name; `local`: the model file's name."
    )
    version: str | None = Field(
        default=None,
        description="A version to tell builds apart; `local`: the file's sha256 by default.",
    )
    base_url: str | None = Field(
        default=None, description="The server's URL (part of the identity)."
    )
    base_urls: list[str] | None = Field(
        default=None,
        description="Several servers of the same served model (an endpoint pool). Unlike "
        "base_url, not part of the identity: adding a replica does not change the plan.",
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key (never the key).",
    )
    temperature: float | None = Field(
        default=None, ge=0, description="Sampling temperature; unset: the provider's default."
    )
    top_p: float | None = Field(
        default=None, gt=0, le=1, description="Nucleus sampling; unset: the provider's default."
    )
    max_tokens: int = Field(default=256, ge=1, description="Most tokens an answer may take.")
    seed: int | None = Field(
        default=None, description="Sampling seed sent with every call (per sample)."
    )
    limit: str | None = Field(
        default=None,
        description="Limit key (`[limits.KEY]`); defaults to the preset's name, else the "
        "provider's. Models sharing a key share its limits.",
    )
    simulate: SimulateConfig | None = Field(
        default=None, description='Planted answers (provider = "simulated").'
    )
    server: LocalServerConfig | None = Field(
        default=None, description='The llama.cpp server(s) of provider = "local".'
    )
    structured_output: bool = Field(
        default=False,
        description="Constrained decoding to the task's JSON schema. It changes what is "
        "measured, so it is part of the model's identity and recorded in every result.",
    )
    structured_output_form: Literal["json_schema", "json_object_schema"] = Field(
        default="json_schema",
        description="How the schema is sent: `json_schema` (OpenAI, vLLM, Groq) or "
        "`json_object_schema` (llama.cpp).",
    )
    model_sha256: str | None = Field(
        default=None, description="`local`: filled in from the model file, not by the user."
    )
    answers: Literal["generate", "score"] = Field(
        default="generate",
        description="How the model's answer to a choice is found: `generate` parses it from the "
        "text it writes; `score` reads the log-probability of each option after the prompt and "
        "picks the best by DC-PMI (for pretrained models). Part of the identity.",
    )
    batch: bool = Field(
        default=False,
        description="Send this model's tasks through its provider's batch API (about half "
        "price, results within a day). Not part of the identity.",
    )
    batch_price: Price | None = Field(
        default=None,
        description="USD per million tokens in batch mode; default: the price less the price "
        "table's batch discount for the provider.",
    )
    reasoning: bool | None = Field(
        default=None,
        description="`openai`: a reasoning model, sent `max_completion_tokens` and "
        "`reasoning_effort` and never a temperature; unset: told by its name (o1, o3, o4-mini, "
        "gpt-5...). `simulated`: it writes a reasoning trace. Part of the identity when set.",
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = Field(
        default=None,
        description="OpenAI reasoning models: how much they think (`minimal` for gpt-5 only); "
        "unset: the API's default (medium). Part of the identity.",
    )
    thinking_budget: int | None = Field(
        default=None,
        ge=-1,
        description="Tokens the model may think for: Anthropic extended thinking (at least "
        "1024, below max_tokens, no temperature but 1), Gemini's thinkingBudget (0 off, -1 "
        "dynamic). Part of the identity.",
    )
    extra_body: dict[str, Any] | None = Field(
        default=None,
        description="Provider-specific request fields, merged into every request body "
        "(tables merge key by key). Part of the identity and recorded, so never a secret.",
    )
    headers_env: dict[str, str] | None = Field(
        default=None,
        description='Extra request headers whose values come from the environment: `{"Header-'
        'Name" = "ENV_VAR"}`. Values are never recorded or printed; not part of the identity.',
    )
    api_key_header: str | None = Field(
        default=None,
        description="The header the key goes in, raw (`api-key` for Azure OpenAI); unset: the "
        "protocol's own (`Authorization: Bearer` for openai).",
    )

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, v: str | None) -> str | None:
        if v is not None and v not in PROVIDERS:
            raise ValueError(f"unknown provider '{v}' (known: {', '.join(PROVIDERS)})")
        return v

    def problems(self) -> list[tuple[str, str, str]]:
        """(field, what is wrong, fix) for settings that depend on the provider."""
        return model_problems(self)

    @property
    def limit_key(self) -> str:
        """A preset is its own service (Groq and OpenAI must not throttle each other)."""
        return self.limit or self.preset or self.provider

    def identity(self) -> dict[str, Any]:
        """What defines the model's behaviour; part of every task id. Never includes a key."""
        return {
            "provider": self.provider,
            "name": self.name,
            "version": self.version,
            "base_url": self.base_url,
            "model_sha256": self.model_sha256,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "structured_output": self.structured_output,
            "simulate": self.simulate.identity() if self.simulate else None,
            # only when set, so the keys of every model that generates stay as they were
            **({"answers": "score"} if self.answers == "score" else {}),
            **{
                name: value
                for name in ("reasoning", "reasoning_effort", "thinking_budget", "extra_body")
                if (value := getattr(self, name)) is not None
            },
            # A pool's servers are no part of it, but the service is: a model name served
            # by Groq is another model than the same name served by Together.
            **({"service": self.preset or self.provider} if self.base_urls else {}),
        }

    @property
    def has_batch_api(self) -> bool:
        """OpenAI, Anthropic or Gemini themselves: a preset of another service speaking their
        protocol (Groq, vLLM, Ollama, ...) has no such batch API, nor its discount."""
        return self.provider in BATCH_PROVIDERS and self.preset in (None, self.provider)

    def price_for(self, batch: bool) -> Price | None:
        """The price of a call made online, or in a batch."""
        return (self.batch_price or self.price) if batch else self.price

    @property
    def label(self) -> str:
        """How tables and results name the model: `groq:openai/llama-3.1-8b-instant` for a
        preset on another protocol's name. Not part of the identity, so not of task ids."""
        service = f"{self.preset}:" if self.preset and self.preset != self.provider else ""
        return f"{service}{self.provider}/{self.name}"

    @property
    def key(self) -> str:
        """Short stable id of the model identity; results are grouped by it, never pooled."""
        return identity_key(self.identity())

    @property
    def deterministic(self) -> bool:
        return is_deterministic(self.identity())


class CampaignConfig(Strict):
    """The campaign config file (TOML): which jobs, on which models, how many samples, at what
    limits. Runs go to `<output_dir>/<name>/<run_id>/`."""

    name: str = Field(
        min_length=1,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="The campaign's name: its folder under `output_dir`.",
    )
    jobs: list[str] = Field(
        min_length=1,
        description="Built-in job names (jobs/*.json) or paths: job files, a traces file, a "
        "run folder (relative to the config's folder).",
    )
    models: list[ModelConfig] = Field(min_length=1, description="The models (`[[models]]`).")
    samples: int | None = Field(
        default=None,
        ge=1,
        description="Samples per condition x variant x strategy; default: the job's protocol "
        "(its deterministic minimum for a model at temperature 0).",
    )
    strategies: list[str] | None = Field(
        default=None, description="Ids of the jobs' debiasing strategies to run; default all."
    )
    seed: int = Field(
        default=0, description="Shuffles the task order and seeds samples (in the manifest)."
    )
    output_dir: str = Field(default="runs", description="Where the campaign's folder goes.")
    run_id: str = Field(
        default="default",
        pattern=r"^[A-Za-z0-9._-]+$",
        description="The run's folder name. `auto`: named by the UTC date when the run starts "
        "(nightly runs); `latest` is the link to the newest of those, so no run may take it.",
    )
    limits: dict[str, LimitConfig] = Field(
        default={}, description="Per limit key (`[limits.KEY]`): pacing, in flight, retries."
    )
    extractor: ModelConfig | None = Field(
        default=None,
        description="A model that states the answer when a reply's JSON cannot be found "
        "(recorded per result as `extractedBy`); give it its own `limit`.",
    )
    screener: ModelConfig | None = Field(
        default=None,
        description="A cheaper model asked first whether a task needs the full call at all "
        "(the trace audit's two-stage option); both stages are recorded.",
    )
    presets: str | None = Field(
        default=None, description="Presets file; default: the built-in configs/presets.toml."
    )
    prices: str | None = Field(
        default=None, description="Price table; default: the built-in configs/prices.toml."
    )
    items: int | None = Field(
        default=None,
        ge=1,
        description="A quick run of a large generated job: at most this many items (prompt "
        "variants) per experiment x condition, a sample seeded by `seed` that keeps its items "
        "as the job grows.",
    )
    shots: int = Field(
        default=0,
        ge=0,
        description="Few-shot: this many worked examples before each question, drawn per item "
        "from its experiment's pool (jobs that have pools: instructed); 0 is zero-shot.",
    )
    shot_kind: Literal["format", "task"] = Field(
        default="format",
        description="`format`: examples of the answer format on neutral choices; `task`: the "
        "task's own examples where a job has them (belief bias), format examples elsewhere.",
    )
    cache: bool | str = Field(
        default=False,
        description="Reuse responses paid for in earlier runs: true for the user's cache "
        "folder, or the cache file's path (relative to this config's folder). Not part of the "
        "plan.",
    )

    @field_validator("cache")
    @classmethod
    def _a_path(cls, value: bool | str) -> bool | str:
        if isinstance(value, str) and not value.strip():
            raise ValueError(
                "cache is true, false or the path of the cache file, not an empty string"
            )
        return value

    @field_validator("name", "run_id")
    @classmethod
    def _not_a_path(cls, value: str) -> str:
        if value.strip(".") == "":  # ".", "..": a folder's name would lead out of output_dir
            raise ValueError(f"'{value}' names a folder above or at this one; give a name")
        return value

    @field_validator("run_id")
    @classmethod
    def _not_the_link(cls, value: str) -> str:
        if value == "latest":
            raise ValueError(
                "'latest' names the link to the newest run; pick another run id, or auto"
            )
        return value

    # The file it was read from (orchestrator.load_campaign), whose folder its relative paths
    # (jobs, a model file, a cache file) start from; None: built in code, they start from the
    # current folder. Not a field: a run's manifest does not hold it.
    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The config file this campaign was read from, or None (built in code)."""
        return self._source

    def limit_for(self, key: str) -> LimitConfig:
        return self.limits.get(key, LimitConfig())

    def helpers(self) -> list[tuple[str, ModelConfig]]:
        """(field, model) of the models that help with the tasks: extractor, screener."""
        return [(name, m) for name in ("extractor", "screener") if (m := getattr(self, name))]


class Campaign:
    """A validated config with its jobs loaded; what the planner and the engine take."""

    def __init__(self, config: CampaignConfig, jobs: list[Job], source: Path | None) -> None:
        self.config, self.jobs, self.source = config, jobs, source
        self.run_dir: Path | None = None  # set when resumed by folder; else from the config
        self.named_by_date = False  # run_id was `auto` (session.name_run)
        # A nightly re-run (named by date, now or when it started: the manifest's namedByDate):
        # it never reads the response cache, since it exists to see today's model.
        self.nightly = False
        self.flags: dict[str, str] = {}  # fields given as command-line flags -> the flag
        self.sources: dict[str, str] = {}  # a field -> its flag, "config" or "default" (plan)
        # A paid model with no price -> the close names the price table has (a misspelling?)
        self.close_prices: dict[str, list[str]] = {}

    def samples_for(self, job: Job, model: ModelConfig | None = None) -> int:
        """Samples per cell: the user's `samples`, else the job's protocol minimum for a model
        that samples or for a deterministic one (ModelConfig.deterministic). A model answering
        by scoring gets one whatever `samples` says: its log-probabilities would repeat."""
        if model is not None and model.answers == "score":
            return 1
        return self.config.samples or job.min_samples_for(model is not None and model.deterministic)

    def strategies_for(self, job: Job):
        wanted = self.config.strategies
        return [s for s in job.strategies if wanted is None or s.id in wanted]

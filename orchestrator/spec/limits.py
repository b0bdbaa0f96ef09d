"""The limits of one limit key (`[limits.KEY]`): its pace, calls in flight, per-attempt
timeout, retries and backoff. The engine's key controller (engine/limits.py) and its calls
(engine/calls.py) apply them; models sharing a key share them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LimitConfig(BaseModel):
    """One limit key (`[limits.KEY]`): its pace, calls in flight, per-attempt timeout, retries.
    Models sharing a key share these limits."""

    # Strict types, as in the rest of the campaign config: `rpm = "10"` is a mistake, not 10.
    model_config = ConfigDict(extra="forbid", strict=True)

    rpm: float | None = Field(
        default=None, gt=0, description="Requests per `period_s`, spaced evenly; unset: unpaced."
    )
    tpm: int | None = Field(
        default=None,
        gt=0,
        description="Tokens (prompt estimate + max_tokens, settled to the reported usage) per "
        "`period_s`; unset: not counted.",
    )
    period_s: float = Field(
        default=60.0, gt=0, description="The window `rpm` and `tpm` count over, in seconds."
    )
    min_tokens_left: int = Field(
        default=1,
        ge=0,
        description="Pause the key until the server's token reset when it reports fewer tokens "
        "left than this.",
    )
    max_in_flight: int = Field(
        default=8, ge=1, description="Calls in flight at most; halves on a 429 and grows back."
    )
    timeout_s: float = Field(default=120.0, gt=0, description="Timeout of one attempt, in seconds.")
    max_attempts: int = Field(
        default=6,
        ge=1,
        description="Attempts per task; 429s, 5xx, timeouts and dropped connections are retried.",
    )
    backoff_base_s: float = Field(
        default=0.5, gt=0, description="Base of the exponential backoff (with jitter), seconds."
    )
    backoff_max_s: float = Field(
        default=60.0, gt=0, description="Longest wait between two attempts, in seconds."
    )
    max_pause_s: float = Field(
        default=300.0,
        gt=0,
        allow_inf_nan=False,
        description="The longest a server's hint may pause this key; one that asks for more (a "
        "quota gone for the day) stops the model instead, to be resumed later.",
    )
    batch_poll_s: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        description="How often a batch in flight is polled (batch mode): its results take "
        "minutes to hours.",
    )

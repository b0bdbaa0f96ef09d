"""One task's call: the attempts under its key's rate gate, retried with backoff (tenacity),
and the parse of the answer that never fails. The runner and the extractor both call here."""

from __future__ import annotations

import functools
import random
from collections.abc import Awaitable, Callable

import anyio
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from orchestrator.cache.provider import CachedProvider
from orchestrator.engine.limits import KeyController
from orchestrator.parse import Parsed, parse_answer
from orchestrator.plan import Task
from orchestrator.providers.base import Completion, Provider
from orchestrator.providers.errors import Fatal, RateLimited, Transient
from orchestrator.spec.limits import LimitConfig


def _wait_strategy(cfg: LimitConfig) -> Callable[[RetryCallState], float]:
    expo = wait_random_exponential(multiplier=cfg.backoff_base_s, max=cfg.backoff_max_s)

    def wait(state: RetryCallState) -> float:
        hint = getattr(state.outcome.exception(), "retry_after", None)
        if hint is not None:  # the server knows best; a little jitter keeps workers apart
            return min(cfg.backoff_max_s, hint) + random.uniform(0, min(1.0, 0.1 * hint + 0.01))
        return expo(state)

    return wait


async def _attempt(
    provider: Provider,
    gate: KeyController,
    task: Task,
    call: Callable[[], Awaitable[Completion]] | None,
) -> Completion:
    # The per-attempt timeout is the provider's (aiohttp's own timer is the cheapest there is);
    # providers raise Transient when it expires.
    entry = await gate.acquire(task.cell.est_tokens)
    try:
        completion = await (provider.complete(task) if call is None else call())
    except BaseException as exc:
        gate.release(entry, error=exc)
        if isinstance(exc, RateLimited) and (exc.retry_after or 0) > gate.config.max_pause_s:
            raise _too_long_a_pause(exc, gate.config) from None
        raise
    gate.release(entry, completion)
    return completion


def _too_long_a_pause(exc: RateLimited, cfg: LimitConfig) -> Fatal:
    """A server asking for a longer pause than max_pause_s will not be back soon (a quota gone for
    the day): every task of the model would wait or fail the same way, so the model stops."""
    return Fatal(
        f"{exc}\n  the server asks for a pause of {exc.retry_after:,.0f} s, more than "
        f"max_pause_s = {cfg.max_pause_s:g}\n  fix: run again later to resume, or raise "
        "max_pause_s in this model's [limits] table"
    )


async def call_with_retries(
    provider: Provider,
    gate: KeyController,
    task: Task,
    on_retry: Callable[[], None],
    call: Callable[[], Awaitable[Completion]] | None = None,
    scored: tuple[str, str] | None = None,
) -> tuple[Completion, int]:
    """The completion and the number of attempts it took; raises the last error if none worked.
    The call is the task's completion, or the scoring of `scored` (text, continuation), or
    `call`. An answer the response cache holds is returned first, as one attempt: it waits for
    no slot of the rate gate, since no request is made.

    The first attempt runs bare: building tenacity's machinery costs more per call than the call
    itself on a fast endpoint, and most calls succeed at once. After a retryable error tenacity
    takes over, replaying that error as its attempt 1 so its backoff and stop rules see it.
    """
    if call is None and type(provider) is CachedProvider:  # off: this one check is all it costs
        if (hit := provider.lookup(task, scored)) is not None:
            return hit, 1
    if scored is not None:
        call = functools.partial(provider.score, task, *scored)
    try:
        return await _attempt(provider, gate, task, call), 1
    except (RateLimited, Transient) as exc:
        replay: BaseException | None = exc
    cfg, attempts = gate.config, 1
    retrying = AsyncRetrying(
        stop=stop_after_attempt(cfg.max_attempts),
        wait=_wait_strategy(cfg),
        retry=retry_if_exception_type((RateLimited, Transient)),
        before_sleep=lambda _: on_retry(),
        sleep=anyio.sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            if replay is not None:
                error, replay = replay, None
                raise error
            attempts += 1
            completion = await _attempt(provider, gate, task, call)
    return completion, attempts


def safe_parse(text: str, task: Task) -> Parsed:
    """A model's text must never take the run down: whatever parsing trips on is a parse error."""
    try:
        return parse_answer(text, task.cell.contract)
    except Exception as exc:  # noqa: BLE001 - any text is possible; the raw answer is kept
        return Parsed(False, error=f"unparseable answer ({type(exc).__name__}: {exc})")

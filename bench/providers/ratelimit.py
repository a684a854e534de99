"""Adaptive concurrency and retries for one provider's requests (BRIEF §7).

:class:`ProviderGate` is shared by every request of a provider: it caps requests in flight,
halves the cap and pauses everyone when the provider answers 429 (for Retry-After seconds when
the server says, else an exponential pause), and grows the cap back by one after each cap's
worth of successes (additive increase, multiplicative decrease, as TCP congestion control).
:func:`call_with_retries` retries transient errors and timeouts with exponential backoff and
full jitter (tenacity's ``wait_random_exponential``; AWS Architecture Blog, "Exponential
Backoff And Jitter", 2015) and never retries permanent or validation errors.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Mapping, TypeVar

from tenacity import (AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt,
                      wait_random_exponential)

from bench.limits import DEFAULT_ATTEMPTS
from bench.providers.errors import ProviderError
from bench.providers.headers import rate_limit_reset_s

T = TypeVar("T")
BACKOFF_MULTIPLIER_S = 0.5   # first retry waits up to 1 s, then 2, 4, ... (full jitter)
BACKOFF_MAX_S = 30.0
PAUSE_WITHOUT_RETRY_AFTER_S = 1.0  # first 429 pause when the server gives no hint; doubles
PAUSE_MAX_S = 120.0


class GateClosed(Exception):
    """The run is stopping; no new request may start."""


@dataclass
class GateStats:
    """What the manifest records per provider: 429s seen, total pause (s), lowest cap."""

    rate_limited: int = 0
    retries: int = 0
    paused_s: float = 0.0
    min_limit: int = 0


class ProviderGate:
    """Concurrency cap and shared pause of one provider.

    Args:
        limit: the highest number of requests in flight (``--concurrency``), >= 1.
        clock: monotonic clock in seconds (tests).

    For one event loop: :meth:`acquire` is awaited by the provider's requests; the other
    methods are plain calls (they never wait).
    """

    def __init__(self, limit: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_limit = max(1, limit)
        self.limit = self.max_limit
        self.in_flight = 0
        self.paused_until = 0.0
        self.stats = GateStats(min_limit=self.max_limit)
        self._clock = clock
        self._changed = asyncio.Event()  # set (and replaced) whenever a slot or pause changes
        self._successes = 0
        self._consecutive_429 = 0
        self._last_cut = float("-inf")
        self._closed = False

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def acquire(self) -> None:
        """Wait for a free slot outside any pause (no wait at all when one is free).

        Raises:
            GateClosed: :meth:`close` was called (the run is stopping).
        """
        while True:
            if self._closed:
                raise GateClosed()
            now = self._clock()
            changed = self._changed
            if now < self.paused_until:
                try:
                    await asyncio.wait_for(changed.wait(), self.paused_until - now)
                except TimeoutError:
                    pass
            elif self.in_flight < self.limit:
                self.in_flight += 1
                return
            else:
                await changed.wait()

    def release(self, success: bool) -> None:
        """Free a slot; a success counts toward growing the cap back by one."""
        self.in_flight -= 1
        if success:
            self._consecutive_429 = 0
            self._successes += 1
            if self._successes >= self.limit and self.limit < self.max_limit:
                self.limit += 1
                self._successes = 0
        self._wake()

    def rate_limited(self, retry_after_s: float | None) -> float:
        """Record a 429: pause every worker and halve the cap; return the pause (s).

        The cap is halved at most once per pause window, so a burst of 429s from requests that
        were already in flight counts as one signal.
        """
        now = self._clock()
        self.stats.rate_limited += 1
        self._consecutive_429 += 1
        if retry_after_s is not None:
            pause = min(max(retry_after_s, 0.0), PAUSE_MAX_S)
        else:
            ceiling = min(PAUSE_MAX_S,
                          PAUSE_WITHOUT_RETRY_AFTER_S * 2 ** (self._consecutive_429 - 1))
            pause = random.uniform(ceiling / 2, ceiling)
        if now >= self._last_cut + max(pause, 0.001):
            self.limit = max(1, self.limit // 2)
            self.stats.min_limit = min(self.stats.min_limit, self.limit)
            self._last_cut = now
            self._successes = 0
        until = now + pause
        if until > self.paused_until:
            self.stats.paused_s += until - max(now, self.paused_until)
            self.paused_until = until
        self._wake()
        return pause

    def observe(self, headers: Mapping[str, str] | None) -> float | None:
        """Read a successful response's rate-limit headers: when a window is exhausted
        (``remaining`` 0), pause new requests until it resets; return the pause (s) or None.
        """
        wait = rate_limit_reset_s(headers)
        if not wait:
            return None
        wait = min(wait, PAUSE_MAX_S)
        until = self._clock() + wait
        if until > self.paused_until:
            self.stats.paused_s += until - max(self._clock(), self.paused_until)
            self.paused_until = until
        return wait

    def close(self) -> None:
        """Wake every waiting request with :class:`GateClosed` (the run is stopping)."""
        self._closed = True
        self._wake()


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


def _wait(retry_state: RetryCallState) -> float:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    if isinstance(exc, ProviderError) and exc.error_class == "rate_limited":
        return 0.0  # the gate's pause holds every worker back, this one included
    return wait_random_exponential(multiplier=BACKOFF_MULTIPLIER_S, max=BACKOFF_MAX_S)(
        retry_state)


async def call_with_retries(request: Callable[[], Awaitable[T]], gate: ProviderGate, *,
                            attempts: int = DEFAULT_ATTEMPTS,
                            sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
                            ) -> tuple[T, int]:
    """Await ``request()`` through ``gate`` with retries; return (its result, attempts made).

    Args:
        request: makes one provider request; raises :class:`ProviderError` on failure.
        gate: the provider's gate.
        attempts: the most attempts, >= 1 (429s, 5xx and timeouts all count).
        sleep: how to wait between attempts (seconds).

    Raises:
        ProviderError: a permanent or validation error at once, or the last retryable error
            after ``attempts`` attempts.
        GateClosed: the run is stopping.
    """
    made = 0

    async def attempt() -> T:
        nonlocal made
        await gate.acquire()
        made += 1
        if made > 1:
            gate.stats.retries += 1
        ok = False
        try:
            result = await request()
            ok = True
            return result
        except ProviderError as exc:
            if exc.error_class == "rate_limited":
                gate.rate_limited(exc.retry_after_s)
            raise
        finally:
            gate.release(ok)

    # The first attempt runs outside tenacity: building its retry state for every request
    # costs CPU (42 us per call measured on this VM for the synchronous Retrying), and almost
    # every request succeeds at once. A retryable failure is then replayed as tenacity's
    # first attempt, so the waits and the stop rule are tenacity's.
    try:
        return await attempt(), made
    except ProviderError as exc:
        if not _retryable(exc) or attempts <= 1:
            raise
        first_failure: ProviderError | None = exc

    async def replay_then_attempt() -> T:
        nonlocal first_failure
        if first_failure is not None:
            failure, first_failure = first_failure, None
            raise failure
        return await attempt()

    retrying = AsyncRetrying(stop=stop_after_attempt(max(1, attempts)),
                             retry=retry_if_exception(_retryable), wait=_wait, sleep=sleep,
                             reraise=True)
    return await retrying(replay_then_attempt), made

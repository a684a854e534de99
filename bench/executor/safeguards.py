"""Retry policy, circuit breaker and token-bucket rate limits (BRIEF §7).

Each piece is thread-safe: breakers and buckets are shared by all calls of a tool by design
(they protect the tool), and guard their state with a lock. Nothing here holds per-call state;
that lives in :class:`~bench.executor.outcome.CallContext`.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import deque
from dataclasses import dataclass
from typing import Literal

from bench.executor.clock import Clock
from bench.executor.outcome import RETRYABLE, ToolError

BreakerState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed read call.

    Backoff is exponential with *full jitter* (AWS Architecture Blog, "Exponential Backoff And
    Jitter", 2015): wait = uniform(0, min(cap_s, base_s * 2**retry)). A 429's Retry-After
    replaces the jittered wait. Writes are never retried (a retried write can apply twice).

    Attributes:
        max_retries: retries after the first attempt (0 disables retries).
        base_s / cap_s: backoff base and ceiling, seconds.
        budget_s: total waiting allowed for one call, seconds; a Retry-After that does not fit
            ends the retries (the error then says when to come back).
    """

    max_retries: int = 3
    base_s: float = 0.1
    cap_s: float = 5.0
    budget_s: float = 10.0

    def retryable(self, error: ToolError, permission: str) -> bool:
        """True when ``error`` may be retried for a tool with ``permission``."""
        return permission == "read" and error.error_class in RETRYABLE

    def wait_s(self, error: ToolError, retry: int, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (0-based) after ``error``."""
        if error.retry_after_s is not None:
            return max(0.0, error.retry_after_s)
        return rng.uniform(0.0, min(self.cap_s, self.base_s * (2 ** retry)))


def call_rng(seed: int, call_id: str, tool: str) -> random.Random:
    """A jitter source private to one call (reproducible; no RNG shared between threads)."""
    digest = hashlib.sha256(f"{seed}|{tool}|{call_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class CircuitBreaker:
    """Per-tool circuit breaker: closed -> open after ``failures`` failures within
    ``window_s`` -> half-open after ``cooldown_s`` (one probe call) -> closed on the probe's
    success, open again on its failure (Nygard, "Release It!", ch. 5).

    Args:
        failures: failures within the window that open the circuit.
        window_s: sliding window length, seconds.
        cooldown_s: time the circuit stays open before a probe, seconds.
        clock: time source.
    """

    def __init__(self, failures: int, window_s: float, cooldown_s: float, clock: Clock) -> None:
        self.failures = failures
        self.window_s = window_s
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._lock = threading.Lock()
        self._recent: deque[float] = deque()
        self._state: BreakerState = "closed"
        self._opened_at = 0.0
        self._probe_out = False
        self.transitions: list[tuple[BreakerState, BreakerState]] = []

    @property
    def state(self) -> BreakerState:
        """Current state (an open circuit past its cool-down reports ``half_open``)."""
        with self._lock:
            self._tick()
            return self._state

    def _move(self, state: BreakerState) -> None:
        if state != self._state:
            self.transitions.append((self._state, state))
            self._state = state

    def _tick(self) -> None:
        if self._state == "open" and self.clock.now() - self._opened_at >= self.cooldown_s:
            self._move("half_open")
            self._probe_out = False

    def allow(self) -> bool:
        """May a call go through now? In half-open state only one probe is let through."""
        with self._lock:
            self._tick()
            if self._state == "closed":
                return True
            if self._state == "half_open" and not self._probe_out:
                self._probe_out = True
                return True
            return False

    def record_success(self) -> None:
        """A call succeeded: a half-open circuit closes."""
        with self._lock:
            if self._state == "half_open":
                self._move("closed")
                self._recent.clear()
            self._probe_out = False

    def record_failure(self) -> None:
        """A call failed with a tool-health error (transient or timeout)."""
        with self._lock:
            now = self.clock.now()
            if self._state == "half_open":
                self._move("open")
                self._opened_at = now
                self._probe_out = False
                return
            self._recent.append(now)
            while self._recent and now - self._recent[0] > self.window_s:
                self._recent.popleft()
            if self._state == "closed" and len(self._recent) >= self.failures:
                self._move("open")
                self._opened_at = now

    def release_probe(self) -> None:
        """A half-open probe ended without a health verdict (e.g. validation error)."""
        with self._lock:
            self._probe_out = False


class TokenBucket:
    """A token bucket: ``rate`` tokens per second, at most ``burst`` stored (thread-safe).

    Args:
        rate: refill rate, tokens per second (> 0).
        burst: capacity in tokens (>= 1); the bucket starts full.
        clock: time source.
    """

    def __init__(self, rate: float, burst: float, clock: Clock) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._tokens = burst
        self._stamp = clock.now()
        self._lock = threading.Lock()

    def try_take(self) -> float:
        """Take one token if available; return 0.0 on success, else the seconds until one is."""
        with self._lock:
            now = self.clock.now()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= 1:
                self._tokens -= 1
                return 0.0
            return (1 - self._tokens) / self.rate

    def refund(self) -> None:
        """Give back a token taken by a call that another level then refused."""
        with self._lock:
            self._tokens = min(self.burst, self._tokens + 1)


@dataclass(frozen=True)
class RateLimit:
    """A rate limit: ``rate`` calls per second with bursts of ``burst`` calls."""

    rate: float
    burst: float = 1.0


class RateLimiter:
    """Three levels of token buckets: global, per tool, per user (BRIEF §7).

    A call takes one token at every configured level, or none: when one level is empty the
    tokens taken at the others are refunded, the call waits (up to ``max_wait_s`` in total) and
    tries again; past that it is refused with a ``rate_limited`` error.

    Args:
        global_limit / tool_limit / user_limit: None disables that level.
        max_wait_s: longest total wait for tokens, seconds.
        clock: time source.
    """

    def __init__(self, clock: Clock, *, global_limit: RateLimit | None = None,
                 tool_limit: RateLimit | None = None, user_limit: RateLimit | None = None,
                 max_wait_s: float = 2.0) -> None:
        self.clock = clock
        self.max_wait_s = max_wait_s
        self._limits = {"global": global_limit, "tool": tool_limit, "user": user_limit}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """True when at least one level is configured."""
        return any(self._limits.values())

    def _bucket(self, level: str, key: str) -> TokenBucket | None:
        limit = self._limits[level]
        if limit is None:
            return None
        with self._lock:
            bucket = self._buckets.get((level, key))
            if bucket is None:
                bucket = TokenBucket(limit.rate, limit.burst, self.clock)
                self._buckets[(level, key)] = bucket
            return bucket

    def acquire(self, tool: str, user: str) -> float:
        """Take a token at each level for one call to ``tool`` by ``user``.

        Returns:
            Seconds waited.

        Raises:
            ToolError: ``rate_limited`` (code ``local_rate_limit``) when the wait would exceed
                ``max_wait_s``; ``retry_after_s`` says when to try again.
        """
        buckets = [b for b in (self._bucket("global", "*"), self._bucket("tool", tool),
                               self._bucket("user", user)) if b is not None]
        waited = 0.0
        while True:
            taken: list[TokenBucket] = []
            need = 0.0
            for bucket in buckets:
                wait = bucket.try_take()
                if wait > 0:
                    need = wait
                    break
                taken.append(bucket)
            if need == 0.0:
                return waited
            for bucket in taken:
                bucket.refund()
            if waited + need > self.max_wait_s:
                raise ToolError("rate_limited", "local_rate_limit",
                                f"rate limit reached for '{tool}'; retry after {need:.2f} s",
                                retry_after_s=need)
            self.clock.sleep(need)
            waited += need

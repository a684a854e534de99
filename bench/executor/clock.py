"""Clocks for backoff, circuit-breaker windows and token buckets.

The executor never calls ``time`` directly for these, so tests can run hours of simulated
backoff in microseconds with :class:`FakeClock`. Attempt durations in traces always use the
real ``time.perf_counter``.
"""

from __future__ import annotations

import threading
import time


class Clock:
    """Real time: ``now()`` is ``time.monotonic()`` in seconds, ``sleep`` really sleeps."""

    def now(self) -> float:
        """Monotonic time in seconds."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` (no-op for <= 0)."""
        if seconds > 0:
            time.sleep(seconds)


class FakeClock(Clock):
    """Simulated time for tests: ``sleep`` advances ``now`` at once (thread-safe).

    Attributes:
        slept: every sleep requested, in seconds, in order (tests inspect backoff with it).
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.slept: list[float] = []

    def now(self) -> float:
        """The simulated time in seconds."""
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        """Advance the simulated time by ``seconds`` without blocking."""
        with self._lock:
            self.slept.append(seconds)
            if seconds > 0:
                self._now += seconds

    def advance(self, seconds: float) -> None:
        """Move simulated time forward (e.g. past a breaker's cool-down)."""
        with self._lock:
            self._now += seconds

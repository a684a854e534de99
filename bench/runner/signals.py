"""Stop signals (SIGINT, SIGTERM) while a run executes."""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from concurrent.futures import Future
from typing import Any, Callable, Iterator




class StopSignals:
    """SIGINT (Ctrl-C) and SIGTERM while a run executes.

    Outside critical sections a signal raises KeyboardInterrupt at once, as Python does.
    Inside one (scoring and executing a row, preparing a label: library code there, such as
    SQLite's progress-handler callback, turns the exception into an ordinary error and would
    swallow it) the signal is only noted in :attr:`pending`, and the run loop stops at its
    next safe point. Handlers are installed only in the main thread (Python's rule) and
    restored on exit.

    Attributes:
        signum: the first signal received (``signal.SIGINT`` / ``signal.SIGTERM``) or None:
            a CI job's SIGTERM followed by a Ctrl-C still reads as terminated.
        pending: a signal arrived inside a critical section and has not been acted on.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.pending = False
        self._critical = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if self._critical:
            self.pending = True
        else:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        """A section where a signal is noted, not raised."""
        self._critical += 1
        try:
            yield
        finally:
            self._critical -= 1


def _next_completed(completed: queue.SimpleQueue[Future], idle: Callable[[], bool],
                    signals: StopSignals) -> Future:
    """The next finished future. While none is there, runs ``idle()`` steps (work that rows
    need later, as a critical section) until one returns False; then waits in 0.5 s slices
    so that Ctrl-C is seen at once.

    Raises:
        KeyboardInterrupt: a stop signal (also one noted during an idle step).
    """
    while True:
        if signals.pending:
            signals.pending = False
            raise KeyboardInterrupt
        if completed.empty():
            with signals.critical():
                stepped = idle()
            if stepped:
                continue
        try:
            return completed.get(timeout=0.5)
        except queue.Empty:
            continue



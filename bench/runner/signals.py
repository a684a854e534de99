"""Stop signals (SIGINT, SIGTERM) while a run executes, as event-loop callbacks."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from typing import Any, Callable, Iterator


class StopSignals:
    """SIGINT (Ctrl-C) and SIGTERM while a run's event loop runs.

    A signal calls ``on_stop(n)`` (n = signals so far) from the loop, between two steps of the
    run: never in the middle of scoring or writing a row, so no critical sections are needed.
    The run's first reaction is to stop sending and wait for the requests in flight; the second
    cancels them. Handlers are installed only in the main thread (Python's rule); the previous
    handlers are restored afterwards (``loop.remove_signal_handler`` alone would reset them to
    the defaults, dropping the CLI's own).

    Attributes:
        signum: the first signal received (``signal.SIGINT`` / ``signal.SIGTERM``) or None:
            a CI job's SIGTERM followed by a Ctrl-C still reads as terminated.
        count: signals received so far.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self._previous: dict[int, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_stop: Callable[[int], None] | None = None

    def install(self, loop: asyncio.AbstractEventLoop, on_stop: Callable[[int], None]) -> None:
        """Route SIGINT and SIGTERM to ``on_stop`` (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._loop, self._on_stop = loop, on_stop
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.getsignal(signum)
            loop.add_signal_handler(signum, self._handle, signum, on_stop)

    def _handle(self, signum: int, on_stop: Callable[[int], None]) -> None:
        self._note(signum)
        on_stop(self.count)

    def _note(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
        self.count += 1

    def _raise(self, signum: int, frame: object) -> None:
        self._note(signum)
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def raising(self) -> Iterator[None]:
        """While the block runs, SIGINT and SIGTERM raise ``KeyboardInterrupt`` in it (noted in
        :attr:`signum` and :attr:`count`) instead of calling ``on_stop``.

        For a step that blocks the loop's thread (an MCP server starting): the loop's
        handler would run only after it, so a stop that came meanwhile let the run send to
        the server before it was seen. Without :meth:`install` (not the main thread) the
        block runs as is.

        Raises:
            KeyboardInterrupt: a stop signal came during the block.
        """
        loop, on_stop = self._loop, self._on_stop
        if loop is None or on_stop is None:
            yield
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
            signal.signal(signum, self._raise)
        try:
            yield
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, self._handle, signum, on_stop)

    def remove(self) -> None:
        """Restore the handlers that were there before :meth:`install`."""
        if self._loop is None:
            return
        for signum, previous in self._previous.items():
            self._loop.remove_signal_handler(signum)
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()
        self._loop = self._on_stop = None

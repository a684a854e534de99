"""``function:<module>:<callable>`` in a worker process of its own
(:class:`ModuleFunctionProvider`; the worker's side is :mod:`bench.providers.function_worker`),
so nothing the user's code does to its process ends or misdirects the run.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import itertools
import multiprocessing
import os
import queue
import sys
import threading
import time
import weakref
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Sequence

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.providers.base import ProviderResponse
from bench.providers.function_calls import FunctionCalls, split_spec, timed_out
from bench.providers.ratelimit import GateClosed
from bench.providers.worker_process import signal_name

# Seconds a closing run gives the worker to exit on its own (the user's atexit handlers run)
# before it is killed.
CLOSE_WAIT_S = 5.0

# The exit code of a worker whose bootstrap re-ran the user's unguarded script, which called
# bench again (:func:`exit_if_main_reimported`); chosen outside the codes Python and the
# shells use (1, 2, 126-255), so that the parent can name the cause.
MAIN_REIMPORTED_EXIT = 87

# Workers not yet closed: killed at the interpreter's exit, before multiprocessing's own exit
# handler joins its children (a worker ignores SIGTERM, so that join would wait for good).
_LIVE: "weakref.WeakSet[ModuleFunctionProvider]" = weakref.WeakSet()


@atexit.register  # after multiprocessing's own handler (imported above): runs before it
def _kill_live_workers() -> None:
    """Kill the worker of every provider not closed."""
    for live in list(_LIVE):
        live.abandon("bench is exiting")


def exit_if_main_reimported() -> None:
    """End this process quietly when it is a worker re-running the user's main script.

    A worker started with ``spawn`` first runs the parent's ``__main__`` script again (as
    ``__mp_main__``; the "Safe importing of main module" rule of :mod:`multiprocessing`'s
    programming guidelines). A script that calls bench outside an
    ``if __name__ == "__main__":`` block then starts a run (and a worker) inside the worker,
    which failed with a second traceback. Called at bench's entry points
    (:func:`bench.evaluate`, this provider): while the process is still bootstrapping,
    it exits with :data:`MAIN_REIMPORTED_EXIT`, which the parent reports in one line naming the
    script (:func:`main_guard_error`).

    Raises:
        SystemExit: in such a worker (no traceback is printed; the process ends).
    """
    # multiprocessing's own test for this case (spawn._check_not_importing_main)
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(MAIN_REIMPORTED_EXIT)


def main_guard_error(provider_id: str) -> BenchError | None:
    """The one-line error of a worker that ended with :data:`MAIN_REIMPORTED_EXIT`: the
    script run as ``__main__`` calls bench when imported; None when ``__main__`` is no file
    (a notebook, ``python -c``), which a worker does not run again."""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if not script:
        return None
    return BenchError(
        f"provider '{provider_id}': the script {script} calls bench when it is imported, and "
        "the function's worker process imports it again (multiprocessing's spawn start "
        "method): put the script's code in an `if __name__ == \"__main__\":` block")


class ModuleFunctionProvider(FunctionCalls):
    """``function:<module>:<attribute>`` in a worker process of its own
    (:mod:`bench.providers.function_worker`): the module is imported there, and each call
    runs there in a thread of its own (a coroutine function on the worker's event loop), so
    calls overlap up to the run's concurrency and share the module's state, as they would in
    this process. What the user's code does to its process stays there: an exit
    (``os._exit``, ``sys.exit`` at import), a crash in native code, ``os.chdir``.

    Args:
        spec: ``<module>:<attribute>``.
        provider_id: the id rows carry (``function:<spec>``).
        timeout_s: seconds a call may take (None: no limit); a longer one is the row's
            :class:`FunctionTimeout`.

    Raises:
        BenchError: the module cannot be imported (whatever it raised, ``SystemExit``
            included, or its process ended while importing), or has no such callable.
    """

    def __init__(self, spec: str, *, provider_id: str, timeout_s: float | None = None) -> None:
        exit_if_main_reimported()
        self.provider_id = provider_id
        self._spec = spec
        self._module_name = split_spec(spec)[0]
        self._timeout_s = timeout_s
        self._model = ""
        self._source_sha256: str | None = None
        self._coroutine = False  # the function is a coroutine function
        self._lock = threading.Lock()
        # request id -> (its loop, the future its complete() awaits)
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop,
                                       asyncio.Future[tuple[str, str]]]] = {}
        self._ids = itertools.count()
        self._tools_sent: set[str] = set()
        self._outbox: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._process: BaseProcess | None = None
        self._ended: str | None = None  # why the worker is gone (None: it runs)
        self._abandoned: str | None = None
        ready: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        # The worker dies with the thread that started it (PR_SET_PDEATHSIG): this one, which
        # lives as long as the worker (it reads the worker's messages).
        threading.Thread(target=self._own, args=(ready,), name="bench-function-worker",
                         daemon=True).start()
        try:
            info = ready.result()
        except BaseException:  # an import error, or Ctrl-C while the module imports
            self.abandon("the provider did not start")
            raise
        self._model, self._source_sha256 = info["model"], info["source_sha256"]
        self._coroutine = bool(info["coroutine"])

    # -- the worker ------------------------------------------------------------------------

    def _own(self, ready: concurrent.futures.Future[dict[str, Any]]) -> None:
        """Start the worker, then hand each of its messages to the request awaiting it
        until the worker ends (the reader thread; see :mod:`bench.providers.function_worker`
        for the messages)."""
        from bench.providers.function_worker import serve
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(target=serve, args=(theirs, self._spec, os.getpid()),
                                  name="bench-function", daemon=True)
        try:
            process.start()
        except BaseException as exc:  # noqa: BLE001 - e.g. no more processes: one line
            ready.set_exception(BenchError(f"provider '{self.provider_id}': cannot start its "
                                           f"process: {type(exc).__name__}: {exc}"))
            return
        theirs.close()
        self._process = process
        _LIVE.add(self)
        if self._abandoned:  # given up (Ctrl-C) while it started: abandon() found no process
            process.kill()
        threading.Thread(target=self._send_all, args=(ours,), name="bench-function-send",
                         daemon=True).start()
        while True:
            message = self._receive(ours, process)
            if message is None:  # the worker has ended: its exit code says how
                process.join(CLOSE_WAIT_S)
                how = signal_name(process.exitcode)
                if not ready.done():
                    unguarded = main_guard_error(self.provider_id) \
                        if process.exitcode == MAIN_REIMPORTED_EXIT else None
                    ready.set_exception(unguarded or BenchError(
                        f"provider 'function:{self._spec}': cannot import "
                        f"'{self._module_name}': its process ended ({how}) while importing "
                        "it"))
                self._end(f"provider '{self.provider_id}': the function's process ended "
                          f"({how}); a function must return or raise, not end its process "
                          "(os._exit, a crash in native code)")
                ours.close()
                return
            if message[0] == "ready":
                ready.set_result(message[1])
            elif message[0] == "error":  # the import failed; the worker exits
                ready.set_exception(BenchError(message[1]))
            elif message[0] == "done":
                _, request_id, ending, text = message
                with self._lock:
                    waiting = self._pending.pop(request_id, None)
                if waiting is not None:  # else: timed out, nobody waits
                    _settle_soon(waiting, (ending, text))

    @staticmethod
    def _receive(conn: Connection, process: BaseProcess) -> tuple[Any, ...] | None:
        """The worker's next message, or None once it has ended (pipe closed, or dead)."""
        ready = wait([conn, process.sentinel])
        if conn in ready:
            try:
                message: tuple[Any, ...] = conn.recv()
                return message
            except (EOFError, OSError):
                return None
        return None

    def _send_all(self, conn: Connection) -> None:
        """Send the outbox to the worker, in order, until None (the sender thread: a worker
        too busy to read never blocks the run's event loop)."""
        while True:
            message = self._outbox.get()
            if message is None:
                return
            try:
                conn.send(message)
            except (OSError, ValueError):  # the worker has gone: the reader says how
                return

    def _end(self, why: str) -> None:
        """The worker has ended: fail every request still waiting with ``why``."""
        with self._lock:
            self._ended = self._ended or why
            waiting, self._pending = list(self._pending.values()), {}
        self._outbox.put(None)
        _LIVE.discard(self)
        for entry in waiting:
            _settle_soon(entry, ("ended", self._ended))

    # -- the provider interface ------------------------------------------------------------

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       variant_key: str, trial: int) -> ProviderResponse:
        """Call the function in the worker and parse its answer like a model's; the tools
        cross to the worker once per ``variant_key``.

        Raises:
            BenchError: the function raised (any exception class; one line), returned no
                answer, or its process ended (``os._exit``, a crash).
            FunctionTimeout: no answer within ``timeout_s``.
            StopRequested: the function raised KeyboardInterrupt (the run stops as at
                Ctrl-C).
            GateClosed: the stopping run abandoned the worker.
        """
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[str, str]] = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            if self._abandoned:
                raise GateClosed(self._abandoned)
            if self._ended:
                raise BenchError(self._ended)
            self._pending[request_id] = (loop, future)
            if variant_key not in self._tools_sent:  # queued before any call that needs them
                self._tools_sent.add(variant_key)
                self._outbox.put(("tools", variant_key, list(tools)))
            self._outbox.put(("call", request_id, list(messages), variant_key, trial))
        try:
            ending, text = await asyncio.wait_for(future, self._timeout_s)
        except TimeoutError:
            self._forget(request_id)
            raise timed_out(self._timeout_s or 0.0, self._coroutine) from None
        except asyncio.CancelledError:  # the run stopped waiting
            self._forget(request_id)
            raise
        if ending == "ended":
            if self._abandoned:
                raise GateClosed(self._abandoned)
            raise BenchError(text)
        return self.answer_from(ending, text, tools, started)

    def _forget(self, request_id: int) -> None:
        """Nobody waits for ``request_id`` any more: drop it, and have the worker cancel it
        (a coroutine is cancelled; a thread cannot be, and is abandoned)."""
        with self._lock:
            self._pending.pop(request_id, None)
            if not self._ended:
                self._outbox.put(("cancel", request_id))

    def describe(self) -> dict[str, Any]:
        """The id, the function's name and its source hash (the response cache's key)."""
        return {"provider": self.provider_id, "model": self._model,
                "source_sha256": self._source_sha256}

    def abandon(self, why: str) -> None:
        """Kill the worker now (calls in flight, hung ones included, end with it); later
        requests raise :class:`GateClosed`."""
        self._abandoned = self._abandoned or why
        process = self._process
        if process is not None and process.is_alive():
            process.kill()

    def close(self) -> None:
        """Ask the worker to exit (its atexit handlers run); kill it after
        :data:`CLOSE_WAIT_S` seconds (an abandoned call may hold it)."""
        process = self._process
        _LIVE.discard(self)
        if process is None:
            return
        self._outbox.put(("close",))
        self._outbox.put(None)
        process.join(CLOSE_WAIT_S)
        if process.is_alive():
            process.kill()
            process.join(CLOSE_WAIT_S)


def _settle_soon(waiting: tuple[asyncio.AbstractEventLoop, asyncio.Future[tuple[str, str]]],
                 result: tuple[str, str]) -> None:
    """Set ``result`` on the awaiting future from any thread (no-op once it is done or its
    loop has closed)."""
    loop, future = waiting

    def settle() -> None:
        if not future.done():
            future.set_result(result)

    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
        loop.call_soon_threadsafe(settle)

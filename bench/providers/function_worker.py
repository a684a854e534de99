"""The worker process of a ``function:<module>:<callable>`` provider: the user's module
imported, and each call run, in a child process of the run.

The user's code may do things to its process that no ``try`` catches: ``os._exit(0)``,
``sys.exit`` while importing, ``os.chdir``, a crash in native code. In the run's own process
each ended or misdirected the run (``os._exit(0)`` exited 0 with the manifest still
``running``). Here they end or change only this process, and
:class:`bench.providers.function_process.ModuleFunctionProvider` reports them as that provider's
error. The process is started with :mod:`multiprocessing` (``spawn``: a fresh interpreter,
the run's ``sys.path`` and working directory), as the embedded model's worker is
(:mod:`bench.providers.local.worker`).

Messages are pickled tuples on a :func:`multiprocessing.Pipe`:

- to the worker: ``("tools", variant_key, tools)`` (once per variant, before its first call),
  ``("call", request_id, messages, variant_key, trial)``, ``("cancel", request_id)`` (nobody
  waits any more: a coroutine is cancelled, a thread is left to end on its own),
  ``("close",)``;
- back: ``("ready", {"model", "source_sha256", "coroutine"})`` once imported, or ``("error", message)``
  (one line) and the worker exits; then ``("done", request_id, ending, text)`` per call, as
  :func:`bench.providers.function_calls.call_ending` says (``ok`` with the answer text, ``failed``
  with one line, ``interrupt``), in the order calls end.

Each plain call runs in a daemon thread of its own, and a coroutine function's calls on one
event loop in a daemon thread, so calls overlap as they would in the run's process (up to the
run's concurrency) and share the module's state.
"""

from __future__ import annotations

import asyncio
import inspect
import pickle
import signal
import threading
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any, Callable

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.providers.function_calls import (
    Answer,
    call_ending,
    load_callable,
    model_name,
    source_hash,
)
from bench.providers.worker_process import die_with_parent


def serve(conn: Connection, spec: str, parent: int) -> None:
    """The worker's entry point: import ``spec`` (``<module>:<callable>``), say ``ready`` (or
    the import's ``error``), then run calls until ``close`` or the end of the pipe.

    Args:
        conn: the worker's end of the pipe.
        spec: ``<module>:<callable>``.
        parent: the run's process id (the worker dies with it).
    """
    # Ctrl-C in a terminal reaches the whole process group, and a CI timeout's SIGTERM too:
    # the run decides what stops (it waits for the calls in flight, then closes this worker).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    die_with_parent(parent)
    sending = threading.Lock()

    def send(message: tuple[object, ...]) -> None:
        with sending:  # calls end in threads of their own
            try:
                conn.send(message)
            except (OSError, ValueError):  # the run has gone; this process follows it
                pass

    try:
        answer = load_callable(spec)
    except BenchError as exc:
        send(("error", str(exc)))
        return
    send(("ready", {"model": model_name(answer), "source_sha256": source_hash(answer),
                    "coroutine": inspect.iscoroutinefunction(answer)}))
    calls = _Calls(answer, send)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message[0] == "close":
            break
        if message[0] == "tools":
            # kept pickled: each call gets its own copy (a function that edits its tools in
            # place must not change the next call's)
            calls.tools[message[1]] = pickle.dumps(message[2])
        elif message[0] == "call":
            calls.start(*message[1:])
        elif message[0] == "cancel":
            calls.cancel(message[1])


class _Calls:
    """The calls of one worker: starts each, sends back how it ended.

    Args:
        answer: the user's callable.
        send: sends one message to the run (thread-safe).
    """

    def __init__(self, answer: Answer, send: Callable[[tuple[Any, ...]], None]) -> None:
        self.answer = answer
        self.send = send
        self.tools: dict[str, bytes] = {}  # variant key -> its tools, pickled
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: dict[int, Future[Any]] = {}  # a coroutine's request id -> its future

    def start(self, request_id: int, messages: list[Message], variant_key: str,
              trial: int) -> None:
        """Start one call; its ``done`` message is sent when it ends."""
        tools: list[Tool] = pickle.loads(self.tools[variant_key])
        if not inspect.iscoroutinefunction(self.answer):
            threading.Thread(target=self._run, args=(request_id, messages, tools, trial),
                             name="bench-function", daemon=True).start()
            return
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="bench-function-loop",
                             daemon=True).start()
        future = asyncio.run_coroutine_threadsafe(self._awaited(messages, tools, trial),
                                                  self._loop)
        self._running[request_id] = future
        future.add_done_callback(lambda done: self._report(request_id, done))

    def _run(self, request_id: int, messages: list[Message], tools: list[Tool],
             trial: int) -> None:
        ending, text = call_ending(lambda: self.answer(messages, tools, trial))
        self.send(("done", request_id, ending, text))

    async def _awaited(self, messages: list[Message], tools: list[Tool], trial: int) -> Any:
        # a BaseException would pass through the loop's machinery: it stays a value here
        try:
            return ("ok", await self.answer(messages, tools, trial))
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # cancel(): the run waits no more
                raise
            return ("raised", exc)
        except BaseException as exc:  # noqa: BLE001 - the user's code; reported below
            return ("raised", exc)

    def _report(self, request_id: int, done: Future[Any]) -> None:
        self._running.pop(request_id, None)
        if done.cancelled():  # cancelled at the run's request: it waits no more
            return
        kind, value = done.result()
        if kind == "raised":
            ending, text = call_ending(lambda: _raise(value))
        else:
            ending, text = call_ending(lambda: value)
        self.send(("done", request_id, ending, text))

    def cancel(self, request_id: int) -> None:
        """Cancel a coroutine's call (a thread cannot be cancelled: it runs on, abandoned)."""
        future = self._running.pop(request_id, None)
        if future is not None:
            future.cancel()


def _raise(exc: BaseException) -> Any:
    """Raise ``exc`` (hands an exception caught in the coroutine to ``call_ending``)."""
    raise exc

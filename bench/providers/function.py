"""The ``function`` provider: answers from a Python callable instead of a model.

Ids: ``function:<name>`` for a callable given to :func:`register_function`, or
``function:<module>:<attribute>`` (e.g. ``function:my_answers:answer``), imported from the
current directory or ``sys.path``. Importing the module runs its code: name only modules you
trust, as with any Python import.

The callable is ``answer(messages, tools, trial) -> str | list[dict] | dict`` (or a coroutine
function returning the same): ``messages`` the case's
conversation (:class:`bench.models.Message`), ``tools`` the variant's tools
(:class:`bench.models.Tool`), ``trial`` the 0-based trial. It returns either the embedded
model's answer text (``{"tool_calls": [{"name": ..., "arguments": {...}}]}``, optionally with
``"text"``: prose for the user, an episode's final answer when there is no call), that list of
calls, or that object; both go through bench's real parser (:func:`bench.parse.parse_json_tool_calls`), so a
malformed answer scores as it would from a model. Useful for tests, baselines (always call the
first tool, keyword rules) and checking the pipeline without a model.

Where it runs: a ``function:<module>:<attribute>`` is imported and called in a worker process
of its own (:class:`ModuleFunctionProvider`, :mod:`bench.providers.function_worker`), so
nothing the user's code does to its process (``os._exit``, ``sys.exit`` at import,
``os.chdir``, a crash in native code) ends or misdirects the run: each is that provider's
one-line error. A registered callable (a Python object, possibly a closure) runs in the run's
own process, in a daemon thread per call (:class:`FunctionProvider`).

What a call may end in (both kinds alike):

- an answer: parsed like a model's;
- an exception, of any class (``Exception``, ``SystemExit``, ``GeneratorExit``, a
  ``BaseException`` subclass of its own): the run stops with one line naming it (status
  ``failed``; a resume asks again);
- ``KeyboardInterrupt``: read as the user's Ctrl-C (the run stops as it would at Ctrl-C:
  ``interrupted``, exit 130, resumable; the row is asked again by the resume);
- no answer within the request timeout (``--request-timeout``, ``timeout_s``): that row's
  ``timeout`` error, said on stderr at once; the row is left for ``--resume`` and the run
  goes on. Not retried: a coroutine is cancelled, but a thread cannot be stopped, so a plain
  function's call is abandoned and runs on until it returns or its process ends.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import hashlib
import importlib
import inspect
import itertools
import json
import multiprocessing
import os
import queue
import sys
import threading
import time
import weakref
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Callable, Literal, Sequence

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import parse_json_tool_calls
from bench.providers.base import Provider, ProviderResponse, Usage
from bench.providers.errors import ProviderError, StopRequested
from bench.providers.ratelimit import GateClosed
from bench.providers.registry import Builder, provider
from bench.providers.worker_process import signal_name

Answer = Callable[[Sequence[Message], Sequence[Tool], int], Any]
_FUNCTIONS: dict[str, Answer] = {}
# How a call ended, as the worker reports it: an answer text, a failure to report (one line),
# or the function's KeyboardInterrupt.
Ending = Literal["ok", "failed", "interrupt"]
# Seconds a closing run gives the worker to exit on its own (the user's atexit handlers run)
# before it is killed.
CLOSE_WAIT_S = 5.0


def register_function(name: str, answer: Answer) -> None:
    """Make ``answer`` the callable of provider id ``function:<name>`` (replaces an earlier
    one of that name)."""
    _FUNCTIONS[name] = answer


def source_hash(answer: Answer) -> str | None:
    """SHA-256 of the callable's source: part of what the response cache keys on, so an
    edited function is asked again. None when Python cannot show the source."""
    try:
        return hashlib.sha256(inspect.getsource(answer).encode("utf-8")).hexdigest()
    except (OSError, TypeError):
        return None


def model_name(answer: Answer) -> str:
    """``function <module>.<qualname>``: what the manifest names as the model."""
    return (f"function {getattr(answer, '__module__', '?')}."
            f"{getattr(answer, '__qualname__', repr(answer))}")


def _split_spec(spec: str) -> tuple[str, str]:
    """(module, attribute) of ``<module>:<attribute>``.

    Raises:
        BenchError: either part is empty (the message lists the registered names).
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        known = ", ".join(sorted(_FUNCTIONS)) or "none registered"
        raise BenchError(f"provider 'function:{spec}': write function:<module>:<callable> or "
                         f"register a name with register_function ({known})")
    return module_name, attribute


def load_callable(spec: str) -> Answer:
    """Import ``<module>:<attribute>`` (from the current directory or ``sys.path``) and return
    the callable. Whatever the module's code raises while importing, ``SystemExit`` and
    ``KeyboardInterrupt`` included, is reported, never passed on.

    Raises:
        BenchError: a malformed spec, the module cannot be imported (one line naming it and
            the exception), the attribute is missing or not callable.
    """
    module_name, attribute = _split_spec(spec)
    if "" not in sys.path and os.getcwd() not in sys.path:
        # the ``bench`` console script, unlike ``python -m``, leaves the current directory
        # off sys.path; the module docstring promises it
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BenchError(f"provider 'function:{spec}': cannot import '{module_name}': "
                         f"{exc}") from None
    except BaseException as exc:  # noqa: BLE001 - the user's module failed while importing
        raise BenchError(f"provider 'function:{spec}': cannot import '{module_name}': "
                         f"{type(exc).__name__}: {exc}") from None
    answer = getattr(module, attribute, None)
    if not callable(answer):
        raise BenchError(f"provider 'function:{spec}': '{module_name}' has no callable "
                         f"'{attribute}'")
    return answer


def resolve(spec: str) -> Answer:
    """The callable a ``function:`` id names (see the module docstring), in this process: a
    registered name, else :func:`load_callable`.

    Raises:
        BenchError: nothing registered under that name, the module cannot be imported, the
            attribute is missing or not callable.
    """
    if spec in _FUNCTIONS:
        return _FUNCTIONS[spec]
    return load_callable(spec)


class NotAnAnswer(ValueError):
    """The function returned something that is neither answer text nor calls; the message
    says what (one line, without the provider's name)."""


def answer_text(result: Any) -> str:
    """The answer text of what the function returned: text as is, a list of calls as
    ``{"tool_calls": [...]}`` JSON, a dict as its JSON (non-JSON values as their ``str``).

    Raises:
        NotAnAnswer: ``result`` is neither text, a list nor a dict, or cannot be written as
            JSON (a circular or absurdly deep value).
    """
    if isinstance(result, str):
        return result
    if isinstance(result, (list, dict)):  # calls, or {"tool_calls": [...], "text": "..."}
        try:
            return json.dumps({"tool_calls": result} if isinstance(result, list) else result,
                              ensure_ascii=False, default=str)
        except (ValueError, RecursionError) as exc:
            raise NotAnAnswer(f"the function returned an answer that is not JSON "
                              f"({type(exc).__name__}: {exc})") from None
    raise NotAnAnswer(f"the function returned {type(result).__name__}; return answer text or a "
                      "list of {name, arguments} calls, or {\"tool_calls\": [...], \"text\": ...}")


def call_ending(call: Callable[[], Any]) -> tuple[Ending, str]:
    """Run ``call()`` (one call of the user's function) and say how it ended: ``("ok",
    answer text)``, ``("interrupt", why)`` for its ``KeyboardInterrupt``, else
    ``("failed", one line)`` for anything it raised (any ``BaseException``) or a result that
    is no answer (:func:`answer_text`). Never raises."""
    try:
        return "ok", answer_text(call())
    except NotAnAnswer as exc:
        return "failed", str(exc)
    except KeyboardInterrupt:
        return "interrupt", "the function raised KeyboardInterrupt"
    except BaseException as exc:  # noqa: BLE001 - the user's code: reported as one line
        try:
            said = str(exc)
        except BaseException:  # noqa: BLE001 - its own __str__ raised
            said = "(its message cannot be shown)"
        return "failed", f"the function raised {type(exc).__name__}: {said}"


class FunctionTimeout(ProviderError):
    """A call of the function gave no answer within the request timeout: class ``timeout``
    but not retried (the first call cannot be stopped and is still running; a second would
    run beside it). The run leaves the row for ``--resume`` and goes on."""

    @property
    def retryable(self) -> bool:
        """False: see the class docstring."""
        return False


def _timed_out(timeout_s: float, coroutine: bool) -> FunctionTimeout:
    """The error of a call that gave no answer within ``timeout_s`` seconds; ``coroutine``:
    the function is a coroutine function (its call was cancelled, not abandoned)."""
    left = "the call was cancelled" if coroutine else \
        "the call is abandoned and runs on (a thread cannot be stopped)"
    return FunctionTimeout(f"the function gave no answer within {timeout_s:g} s "
                           f"(--request-timeout); not retried: {left}", error_class="timeout")


class _FunctionCalls(Provider):
    """What both function providers share: a call's ending made into the row's answer or
    error (:meth:`answer_from`)."""

    provider_id: str
    _model: str

    def answer_from(self, ending: str, text: str, tools: Sequence[Tool],
                    started: float) -> ProviderResponse:
        """The provider answer for a call that ended as ``ending`` (:func:`call_ending`),
        parsed like a model's; ``started`` is the ``time.perf_counter()`` of the request.

        Raises:
            BenchError: the call failed (``text`` says how).
            StopRequested: the function raised KeyboardInterrupt: the run stops as a Ctrl-C
                stops it, and the row is left unwritten for the resume.
        """
        if ending == "interrupt":
            raise StopRequested(f"{self.provider_id}: the function raised KeyboardInterrupt; "
                                "stopping the run as Ctrl-C would")
        if ending != "ok":
            raise BenchError(f"provider '{self.provider_id}': {text}")
        return ProviderResponse(raw=text, parsed=parse_json_tool_calls(text, "stop"),
                                finish_reason="stop", usage=Usage(),
                                latency_s=time.perf_counter() - started,
                                request={"model": self._model,
                                         "tools": [t.name for t in tools]})


async def _in_daemon_thread(function: Callable[[], tuple[Ending, str]]
                            ) -> tuple[Ending, str]:
    """``function()`` (which never raises: :func:`call_ending`) in a new daemon thread (the
    caller's context variables copied, as :func:`asyncio.to_thread` does), awaited. Not
    :func:`asyncio.to_thread`: asyncio.run and the interpreter's exit join the default
    executor's threads, so a function that never returns kept the process alive after the run
    had stopped. Cancelling the await (a timeout, a stopping run) abandons the thread."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[tuple[Ending, str]] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: tuple[Ending, str]) -> None:
        if not future.done():  # cancelled meanwhile: the run stopped waiting
            future.set_result(result)

    def work() -> None:
        result = context.run(function)
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, result)

    threading.Thread(target=work, name="bench-function", daemon=True).start()
    return await future


class FunctionProvider(_FunctionCalls):
    """A provider whose answers come from ``answer(messages, tools, trial)``, called in this
    process (a registered callable; see the module docstring for how calls end).

    Args:
        answer: the callable (see the module docstring).
        provider_id: the id rows carry.
        model: what the manifest names as the model.
        timeout_s: seconds a call may take (None: no limit); a longer one is the row's
            :class:`FunctionTimeout`.
    """

    def __init__(self, answer: Answer, *, provider_id: str, model: str | None = None,
                 timeout_s: float | None = None) -> None:
        self.provider_id = provider_id
        self._answer = answer
        self._model = model or model_name(answer)
        self._timeout_s = timeout_s

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       variant_key: str, trial: int) -> ProviderResponse:
        """Call the function and parse its answer like a model's. A coroutine function is
        awaited; a plain one runs in a daemon thread of its own (:func:`_in_daemon_thread`),
        so a slow one never stalls the run's event loop and a hung one never keeps a stopped
        run's process alive.

        Raises:
            BenchError: the function raised (any exception class; its message, one line) or
                returned neither text nor a list.
            FunctionTimeout: no answer within ``timeout_s``.
            StopRequested: the function raised KeyboardInterrupt (the run stops as at
                Ctrl-C).
        """
        started = time.perf_counter()
        try:
            ending, text = await asyncio.wait_for(self._call(list(messages), list(tools), trial),
                                                  self._timeout_s)
        except TimeoutError:
            raise _timed_out(self._timeout_s or 0.0,
                             inspect.iscoroutinefunction(self._answer)) from None
        return self.answer_from(ending, text, tools, started)

    async def _call(self, messages: list[Message], tools: list[Tool], trial: int
                    ) -> tuple[Ending, str]:
        """One call of the function, ended as :func:`call_ending` says."""
        if not inspect.iscoroutinefunction(self._answer):
            return await _in_daemon_thread(lambda: call_ending(
                lambda: self._answer(messages, tools, trial)))
        try:
            result = await self._answer(messages, tools, trial)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the run cancelled this request
                raise
            return "failed", "the function raised CancelledError"
        except BaseException as exc:  # noqa: BLE001 - the user's code: one line
            error = exc  # `exc` is unbound when the except block ends; the lambda keeps `error`
            return call_ending(lambda: _reraise(error))
        return call_ending(lambda: result)

    def response(self, result: Any, tools: Sequence[Tool], started: float) -> ProviderResponse:
        """``result`` (answer text or a list of calls) parsed like a model's answer;
        ``started`` is the ``time.perf_counter()`` of the request (for ``latency_s``).

        Raises:
            BenchError: ``result`` is neither text, a list nor a dict.
        """
        ending, text = call_ending(lambda: result)
        return self.answer_from(ending, text, tools, started)

    def describe(self) -> dict[str, Any]:
        """The id, the function's name and its source hash (the response cache's key)."""
        return {"provider": self.provider_id, "model": self._model,
                "source_sha256": source_hash(self._answer)}


def _reraise(exc: BaseException) -> Any:
    """Raise ``exc`` (hands an exception caught elsewhere to :func:`call_ending`)."""
    raise exc


# Workers not yet closed: killed at the interpreter's exit, before multiprocessing's own exit
# handler joins its children (a worker ignores SIGTERM, so that join would wait for good).
_LIVE: "weakref.WeakSet[ModuleFunctionProvider]" = weakref.WeakSet()


@atexit.register  # after multiprocessing's own handler (imported above): runs before it
def _kill_live_workers() -> None:
    """Kill the worker of every provider not closed."""
    for live in list(_LIVE):
        live.abandon("bench is exiting")


class ModuleFunctionProvider(_FunctionCalls):
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
        self.provider_id = provider_id
        self._spec = spec
        self._module_name = _split_spec(spec)[0]
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
                    ready.set_exception(BenchError(
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
                return conn.recv()
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
            raise _timed_out(self._timeout_s or 0.0, self._coroutine) from None
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


@provider("function", id_form="function:<module>:<callable>", options="timeout")
def _function() -> Builder:
    def build(provider_id: str, rest: str, options: dict[str, Any]) -> Provider:
        timeout_s = options.get("timeout_s")
        if rest in _FUNCTIONS:
            return FunctionProvider(_FUNCTIONS[rest], provider_id=provider_id,
                                    timeout_s=timeout_s)
        return ModuleFunctionProvider(rest, provider_id=provider_id, timeout_s=timeout_s)
    return build

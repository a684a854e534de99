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
of its own (:class:`ModuleFunctionProvider` in :mod:`bench.providers.function_process`, the
worker's side in :mod:`bench.providers.function_worker`), so
nothing the user's code does to its process (``os._exit``, ``sys.exit`` at import,
``os.chdir``, a crash in native code) ends or misdirects the run: each is that provider's
one-line error. A registered callable (a Python object, possibly a closure) runs in the run's
own process, in a daemon thread per call (:class:`FunctionProvider`, here). What both share
(loading, how a call ends, the registry of names) is :mod:`bench.providers.function_calls`.

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
import contextlib
import contextvars
import inspect
import threading
import time
from typing import Any, Callable, Sequence

from bench.models import Message, Tool
from bench.providers.base import Provider, ProviderResponse
from bench.providers.function_calls import (  # noqa: F401 - re-exported: the function API
    Answer,
    Ending,
    FunctionCalls,
    FunctionTimeout,
    NotAnAnswer,
    answer_text,
    call_ending,
    load_callable,
    model_name,
    register_function,
    registered_function,
    resolve,
    source_hash,
    timed_out,
)
from bench.providers.function_process import ModuleFunctionProvider
from bench.providers.registry import Builder, provider


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


class FunctionProvider(FunctionCalls):
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
            raise timed_out(self._timeout_s or 0.0,
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

    def response(self, result: object, tools: Sequence[Tool], started: float) -> ProviderResponse:
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


# taken as deterministic: a function of the request (a user function that samples should turn
# the gate's per-case rule off, fail_on_flips = false)
@provider("function", id_form="function:<module>:<callable>", options="timeout",
          deterministic=True)
def _function() -> Builder:
    def build(provider_id: str, rest: str, options: dict[str, Any]) -> Provider:
        timeout_s = options.get("timeout_s")
        registered = registered_function(rest)
        if registered is not None:
            return FunctionProvider(registered, provider_id=provider_id, timeout_s=timeout_s)
        return ModuleFunctionProvider(rest, provider_id=provider_id, timeout_s=timeout_s)
    return build

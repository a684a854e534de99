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
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import importlib
import inspect
import json
import os
import sys
import threading
import time
from typing import Any, Callable, Sequence

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import parse_json_tool_calls
from bench.providers.base import Provider, ProviderResponse, Usage
from bench.providers.registry import Builder, provider

Answer = Callable[[Sequence[Message], Sequence[Tool], int], Any]
_FUNCTIONS: dict[str, Answer] = {}


def register_function(name: str, answer: Answer) -> None:
    """Make ``answer`` the callable of provider id ``function:<name>`` (replaces an earlier
    one of that name)."""
    _FUNCTIONS[name] = answer


def _source_hash(answer: Answer) -> str | None:
    """SHA-256 of the callable's source: part of what the response cache keys on, so an
    edited function is asked again. None when Python cannot show the source."""
    try:
        return hashlib.sha256(inspect.getsource(answer).encode("utf-8")).hexdigest()
    except (OSError, TypeError):
        return None


def resolve(spec: str) -> Answer:
    """The callable a ``function:`` id names (see the module docstring).

    Raises:
        BenchError: nothing registered under that name, the module cannot be imported, the
            attribute is missing or not callable.
    """
    if spec in _FUNCTIONS:
        return _FUNCTIONS[spec]
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        known = ", ".join(sorted(_FUNCTIONS)) or "none registered"
        raise BenchError(f"provider 'function:{spec}': write function:<module>:<callable> or "
                         f"register a name with register_function ({known})")
    if "" not in sys.path and os.getcwd() not in sys.path:
        # the ``bench`` console script, unlike ``python -m``, leaves the current directory
        # off sys.path; the module docstring promises it
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BenchError(f"provider 'function:{spec}': cannot import '{module_name}': "
                         f"{exc}") from None
    except Exception as exc:  # the user's module failed while importing (syntax, its code)
        raise BenchError(f"provider 'function:{spec}': cannot import '{module_name}': "
                         f"{type(exc).__name__}: {exc}") from None
    answer = getattr(module, attribute, None)
    if not callable(answer):
        raise BenchError(f"provider 'function:{spec}': '{module_name}' has no callable "
                         f"'{attribute}'")
    return answer


async def _in_daemon_thread(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` in a new daemon thread (the caller's context variables copied, as
    :func:`asyncio.to_thread` does), awaited. Not :func:`asyncio.to_thread`: asyncio.run and
    the interpreter's exit join the default executor's threads, so a function that never
    returns kept the process alive after the run had stopped.

    Raises:
        BaseException: whatever ``function`` raised.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(error: BaseException | None, result: Any) -> None:
        if not future.done():  # cancelled meanwhile: the run stopped waiting
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

    def work() -> None:
        error, result = None, None
        try:
            result = context.run(function, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, error, result)

    threading.Thread(target=work, name="bench-function", daemon=True).start()
    return await future


class FunctionProvider(Provider):
    """A provider whose answers come from ``answer(messages, tools, trial)``.

    Args:
        answer: the callable (see the module docstring).
        provider_id: the id rows carry.
        model: what the manifest names as the model.
    """

    def __init__(self, answer: Answer, *, provider_id: str, model: str | None = None) -> None:
        self.provider_id = provider_id
        self._answer = answer
        self._model = model or f"function {getattr(answer, '__module__', '?')}." \
                               f"{getattr(answer, '__qualname__', repr(answer))}"

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       variant_key: str, trial: int) -> ProviderResponse:
        """Call the function and parse its answer like a model's. A coroutine function is
        awaited; a plain one runs in a daemon thread of its own (:func:`_in_daemon_thread`),
        so a slow one never stalls the run's event loop and a hung one never keeps a stopped
        run's process alive.

        Raises:
            BenchError: the function raised (its message, one line) or returned neither text
                nor a list.
        """
        started = time.perf_counter()
        try:
            if inspect.iscoroutinefunction(self._answer):
                result = await self._answer(list(messages), list(tools), trial)
            else:
                result = await _in_daemon_thread(self._answer, list(messages), list(tools),
                                                 trial)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            # the user's code: one line, no traceback. Its SystemExit or KeyboardInterrupt is
            # not a stop of bench (signals reach the run's loop, never this await)
            raise BenchError(f"provider '{self.provider_id}': the function raised "
                             f"{type(exc).__name__}: {exc}") from None
        return self.response(result, tools, started)

    def response(self, result: Any, tools: Sequence[Tool], started: float) -> ProviderResponse:
        """``result`` (answer text or a list of calls) parsed like a model's answer;
        ``started`` is the ``time.perf_counter()`` of the request (for ``latency_s``).

        Raises:
            BenchError: ``result`` is neither text, a list nor a dict.
        """
        if isinstance(result, (list, dict)):  # calls, or {"tool_calls": [...], "text": "..."}
            try:
                text = json.dumps({"tool_calls": result} if isinstance(result, list) else result,
                                  ensure_ascii=False, default=str)
            except (ValueError, RecursionError) as exc:  # a circular or absurdly deep value
                raise BenchError(f"provider '{self.provider_id}': the function returned "
                                 f"an answer that is not JSON ({type(exc).__name__}: "
                                 f"{exc})") from None
        elif isinstance(result, str):
            text = result
        else:
            raise BenchError(f"provider '{self.provider_id}': the function returned "
                             f"{type(result).__name__}; return answer text or a list of "
                             "{name, arguments} calls, or {\"tool_calls\": [...], \"text\": ...}")
        return ProviderResponse(raw=text, parsed=parse_json_tool_calls(text, "stop"),
                                finish_reason="stop", usage=Usage(),
                                latency_s=time.perf_counter() - started,
                                request={"model": self._model,
                                         "tools": [t.name for t in tools]})

    def describe(self) -> dict[str, Any]:
        """The id, the function's name and its source hash (the response cache's key)."""
        return {"provider": self.provider_id, "model": self._model,
                "source_sha256": _source_hash(self._answer)}


@provider("function", id_form="function:<module>:<callable>")
def _function() -> Builder:
    return lambda provider_id, rest, options: FunctionProvider(resolve(rest),
                                                               provider_id=provider_id)

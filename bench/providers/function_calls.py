"""What both kinds of ``function`` provider share (:mod:`bench.providers.function`): the
registry of named callables, loading ``<module>:<attribute>``, and how one call of the user's
function ends (:func:`call_ending`) and becomes the row's answer or error
(:class:`FunctionCalls`). The worker process (:mod:`bench.providers.function_worker`) uses
the same functions, so a call ends alike in either process.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import sys
import time
from typing import Any, Callable, Literal, Sequence

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import parse_json_tool_calls
from bench.providers.base import Provider, ProviderResponse, Usage
from bench.providers.errors import ProviderError, StopRequested

Answer = Callable[[Sequence[Message], Sequence[Tool], int], Any]
_FUNCTIONS: dict[str, Answer] = {}
# How a call ended, as the worker reports it: an answer text, a failure to report (one line),
# or the function's KeyboardInterrupt.
Ending = Literal["ok", "failed", "interrupt"]


def registered_function(name: str) -> Answer | None:
    """The callable registered as ``name`` (:func:`register_function`), or None."""
    return _FUNCTIONS.get(name)


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


def split_spec(spec: str) -> tuple[str, str]:
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
    module_name, attribute = split_spec(spec)
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
    answer: Answer | None = getattr(module, attribute, None)
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


def answer_text(result: object) -> str:
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


def call_ending(call: Callable[[], object]) -> tuple[Ending, str]:
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


def timed_out(timeout_s: float, coroutine: bool) -> FunctionTimeout:
    """The error of a call that gave no answer within ``timeout_s`` seconds; ``coroutine``:
    the function is a coroutine function (its call was cancelled, not abandoned)."""
    left = "the call was cancelled" if coroutine else \
        "the call is abandoned and runs on (a thread cannot be stopped)"
    return FunctionTimeout(f"the function gave no answer within {timeout_s:g} s "
                           f"(--request-timeout); not retried: {left}", error_class="timeout")


class FunctionCalls(Provider):
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

"""Execute calls on the Python functions a project's tools were made from
(:mod:`bench.importers.python_module`).

Each call's arguments (already checked against the tool's JSON Schema by the executor) are
validated once more by the function's own pydantic parameter model, which turns a nested
object into the model the function expects, then the function runs on one of the executor's
daemon thread of its own under its per-call timeout (a function that does not return in time
is abandoned and reported as ``timeout``; Python cannot stop a thread, but a daemon thread does
not keep bench from exiting, so a function that never returns cannot hang the command at its
end). ``async def`` functions run to completion on their own event loop.

What the function raises is classed like the reference executor's errors
(:mod:`bench.executor.outcome`):

- :class:`~bench.executor.outcome.ToolError`: as raised;
- ``TimeoutError`` -> ``timeout``; ``ConnectionError`` -> ``transient``;
- an exception with an HTTP status (``status_code``, ``status``, or ``response.status_code``,
  as ``requests``, ``httpx`` and the OpenAI/Anthropic SDKs raise): 429 -> ``rate_limited``,
  5xx -> ``transient``, other 4xx -> ``permanent``;
- pydantic's ``ValidationError``, ``ValueError``, ``TypeError`` -> ``validation`` (the
  arguments did not suit the function: never retried);
- ``KeyError``, ``LookupError``, ``FileNotFoundError`` -> ``permanent`` ``not_found``;
  ``PermissionError`` -> ``permanent`` ``permission_denied``;
- anything else -> ``permanent`` ``tool_error`` with its type and the first line of its
  message, every ``BaseException`` included: ``SystemExit`` (a function calling
  ``sys.exit()`` fails its call; it does not end bench), ``KeyboardInterrupt``,
  ``asyncio.CancelledError``, ``GeneratorExit``.

The user's Ctrl-C still stops bench: CPython runs signal handlers, and so raises the
``KeyboardInterrupt`` of a SIGINT, only in the main thread
(https://docs.python.org/3/library/signal.html#signals-and-threads), and a function never
runs there. So a ``KeyboardInterrupt`` caught in the function's worker thread was raised by
the function's own code (a failed call), while the user's arrives in the thread that waits
for the function (the main thread, or bench's caller of it) and is not caught here. A
function that sends the process a SIGINT itself (``os.kill``, ``signal.raise_signal``,
``_thread.interrupt_main``) cannot be told from the user and stops the run too.

The return value becomes JSON data with pydantic (``to_jsonable_python``: models, dataclasses,
dates, sets...); a value pydantic cannot turn into JSON is a ``malformed_result``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from bench.executor.backends.base import Handler
from bench.executor.outcome import CallContext, ToolError
from bench.importers.python_module import PythonTool


def classify_exception(exc: BaseException, name: str) -> ToolError:
    """The :class:`ToolError` for an exception a tool function raised (see the module
    docstring for the table)."""
    if isinstance(exc, ToolError):
        return exc
    said = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {said[0]}" if said else type(exc).__name__
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(exc, "status", None)
    if not isinstance(status, int):
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int) and 400 <= status <= 599:
        if status == 429:
            return ToolError("rate_limited", "http_429", f"'{name}' is rate-limited ({text}); "
                             "wait and retry", status=429)
        if status >= 500:
            return ToolError("transient", f"http_{status}", f"'{name}' failed ({text}); retry "
                             "once", status=status)
        return ToolError("permanent", f"http_{status}", f"'{name}' refused the call ({text})",
                         status=status)
    if isinstance(exc, TimeoutError):
        return ToolError("timeout", "timeout", f"'{name}' timed out ({text})")
    if isinstance(exc, ConnectionError):
        return ToolError("transient", "connection_error", f"'{name}' lost its connection "
                         f"({text}); retry once")
    if isinstance(exc, PermissionError):
        return ToolError("permanent", "permission_denied", f"'{name}' was refused ({text})")
    if isinstance(exc, (KeyError, LookupError, FileNotFoundError)):
        return ToolError("permanent", "not_found", f"'{name}' found nothing ({text}); check "
                         "the identifier")
    if isinstance(exc, (ValidationError, ValueError, TypeError)):
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ToolError("validation", "invalid_argument", f"'{name}' rejected its arguments "
                         f"({type(exc).__name__}: {first}); fix them, do not resend unchanged")
    return ToolError("permanent", "tool_error", f"'{name}' failed ({text})")


class PythonBackend:
    """Handlers for the functions of a Python module of tools.

    Args:
        tools: the module's tools (:func:`bench.importers.python_module.import_python`);
            a schema-only tool (a pydantic model, no function) gets no handler.
    """

    def __init__(self, tools: list[PythonTool]) -> None:
        self.tools = {tool.name: tool for tool in tools if tool.function is not None}

    def call(self, name: str, arguments: dict[str, Any], ctx: CallContext) -> Any:
        """Run the function of tool ``name`` with ``arguments``; returns JSON data.

        Raises:
            ToolError: whatever the function raised, classed (module docstring).
        """
        tool = self.tools[name]
        function = tool.function
        assert function is not None
        try:
            parsed = tool.arguments.model_validate(arguments)
        except ValidationError as exc:
            raise classify_exception(exc, name) from None
        kwargs = {field: getattr(parsed, field) for field in tool.arguments.model_fields
                  if field in arguments or not tool.arguments.model_fields[field]
                  .is_required()}
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                result = function(**kwargs)
                if inspect.isawaitable(result):
                    result = asyncio.run(_awaited(result))
                box["result"] = result
            # every BaseException: the user's Ctrl-C never arrives in this thread (module
            # docstring), so whatever is raised here is the function's failure
            except BaseException as exc:  # noqa: BLE001 - the user's code: classed
                box["error"] = exc

        worker = threading.Thread(target=target, name=f"tool-{name}", daemon=True)
        budget = max(0.0, ctx.deadline - time.monotonic())
        worker.start()
        worker.join(budget)
        if worker.is_alive():
            ctx.cancelled.set()
            raise ToolError("timeout", "timeout", f"'{name}' did not answer within "
                            f"{budget:.3g} s")
        if "error" in box:
            raise classify_exception(box["error"], name) from None
        result = box.get("result")
        try:
            return to_jsonable_python(result)
        except PydanticSerializationError as exc:
            raise ToolError("transient", "malformed_result", f"'{name}' returned data that is "
                            f"not JSON ({str(exc).splitlines()[0]})") from None

    def handlers(self) -> dict[str, Handler]:
        """One handler per function. Its own permission tag is ``read``: the tool's
        definition carries whether it writes (``bench init`` marks every function a write
        unless told it only reads; the stricter of the two tags applies). Handlers are
        ``cooperative``: :meth:`call` stops waiting at the attempt's deadline itself."""
        def make(name: str) -> Handler:
            return Handler(lambda args, ctx: self.call(name, args, ctx), cooperative=True)
        return {name: make(name) for name in self.tools}


async def _awaited(awaitable: Any) -> Any:
    return await awaitable

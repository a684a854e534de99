"""What went wrong on an MCP server (:mod:`bench.executor.backends.mcp`): a failed
``tools/call`` classed like the reference executor's errors (:func:`classify_failure`), a
connection that is gone (:func:`connection_closed`), a stdio server's exit
(:class:`ServerExit`); and a call result's data (:func:`result_data`).
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from typing import Any, Sequence

from bench.executor.outcome import ToolError

def result_data(result: Any) -> Any:
    """A CallToolResult's data: its structured content, else its text parsed as JSON, else
    the texts."""
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if set(content) == {"result"} else content
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    if len(texts) == 1:
        try:
            return json.loads(texts[0])
        except ValueError:
            return texts[0]
    return texts


# httpx exception names that mean the connection, not the tool, failed (retryable)
_TRANSPORT_ERRORS = frozenset({"ConnectError", "ConnectTimeout", "ReadError", "ReadTimeout",
                               "WriteError", "WriteTimeout", "PoolTimeout", "RemoteProtocolError",
                               "NetworkError", "TransportError", "TimeoutException",
                               "ClosedResourceError", "BrokenResourceError",
                               "EndOfStream"})


def classify_failure(exc: BaseException, name: str) -> ToolError:
    """A failure of ``tools/call`` as a :class:`ToolError` classed like the reference
    executor's (:mod:`bench.executor.outcome`): a lost connection or a transport timeout ->
    ``transient``; an HTTP status -> ``rate_limited`` (429, with Retry-After), ``transient``
    (5xx) or ``permanent`` (other 4xx); anything else the SDK raised (a JSON-RPC error the
    server answered) -> ``permanent``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        if status == 429:
            retry_after = None
            try:
                retry_after = float(response.headers.get("retry-after"))  # type: ignore[union-attr]
            except (TypeError, ValueError, AttributeError):
                pass
            return ToolError("rate_limited", "http_429", f"the MCP server is rate-limiting "
                             f"'{name}'; wait and retry", retry_after_s=retry_after, status=429)
        if status >= 500:
            return ToolError("transient", f"http_{status}", f"the MCP server failed on "
                             f"'{name}' (HTTP {status}); retry once", status=status)
        return ToolError("permanent", f"http_{status}", f"the MCP server refused '{name}' "
                         f"(HTTP {status})", status=status)
    if isinstance(exc, (OSError, EOFError)) or any(
            cls.__name__ in _TRANSPORT_ERRORS for cls in type(exc).__mro__):
        return ToolError("transient", "mcp_transport", f"MCP transport failed: "
                         f"{type(exc).__name__}: {exc}")
    return ToolError("permanent", "mcp_error", f"MCP error: {exc}")


#: Seconds to wait, after the connection closed, for the server's exit status (the SDK reaps
#: the process on its own loop; a server that keeps running is stopped at its restart).
EXIT_WAIT_S = 2.0

#: The JSON-RPC error code the SDK answers a request with once its connection is closed
#: (``mcp_types.CONNECTION_CLOSED``).
_CONNECTION_CLOSED = -32000


def connection_closed(exc: BaseException) -> bool:
    """True when ``exc`` (a failed ``tools/call``) says the connection to the server is gone:
    the SDK's ``Connection closed`` error, or a transport error (:data:`_TRANSPORT_ERRORS`,
    ``OSError``, ``EOFError``)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if getattr(exc, "code", None) == _CONNECTION_CLOSED and \
            str(getattr(exc, "message", "")).lower() == "connection closed":
        return True
    return isinstance(exc, (OSError, EOFError)) or any(
        cls.__name__ in _TRANSPORT_ERRORS for cls in type(exc).__mro__)


@dataclass
class ServerExit:
    """One exit of a stdio server.

    Attributes:
        generation: which start of the server exited (1 = the first).
        returncode: its exit status (negative: killed by that signal), None when it closed
            its connection but had not exited within :data:`EXIT_WAIT_S`.
        tools: the bench names of the tools whose calls were running when it exited (empty:
            it exited between calls).
    """

    generation: int
    returncode: int | None
    tools: list[str] = field(default_factory=list)

    @property
    def code(self) -> str:
        """The error code of the calls it failed: ``exit_3``, ``signal_9`` or
        ``connection_closed``."""
        if self.returncode is None:
            return "connection_closed"
        return f"exit_{self.returncode}" if self.returncode >= 0 else \
            f"signal_{-self.returncode}"

    @property
    def said(self) -> str:
        """What happened, e.g. ``exited with exit code 3``."""
        if self.returncode is None:
            return "closed its connection"
        if self.returncode >= 0:
            return f"exited with exit code {self.returncode}"
        try:
            name = f" ({signal.Signals(-self.returncode).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {-self.returncode}{name}"


def during(exits: Sequence[ServerExit]) -> str:
    """``during calls of crash, boom`` (the tools of ``exits``' calls), or ``between
    calls``."""
    tools = list(dict.fromkeys(tool for e in exits for tool in e.tools))
    return f"during calls of {', '.join(tools)}" if tools else "between calls"

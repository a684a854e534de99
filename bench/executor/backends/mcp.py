"""Execute calls on a real MCP server, over stdio or Streamable HTTP, through the official
``mcp`` SDK.

The SDK is asynchronous; the executor is thread-based. :class:`McpBackend` owns one event loop
in a background thread holding one client session (``tools/list`` once, then ``tools/call`` per
call), and its handlers submit coroutines to that loop, so calls from many executor threads
share the session safely. Tool permissions come from the server's annotations: a tool is
``read`` only when it says ``readOnlyHint: true``, otherwise ``write`` (MCP's default meaning);
a toolset's ``read_only = [...]`` overrides that (:mod:`bench.executor.runhook`).

A server's tool name bench cannot use (``get.weather``) or that it lists twice has a bench
name (:func:`bench.importers.mcp_server.bench_names`, with the toolset's ``server_names``);
each call goes to the server under the server's own name.

A stdio server's stderr goes through a pipe to its log file one line at a time, redacted
(:func:`bench.redact.redact_bytes`: secret shapes, the values of the ``${NAME}`` variables
the toolset's settings expand, and the secrets of the server's own command line, registered
before it starts: :func:`bench.redact.register_command_secrets`, e.g. ``--api-key X``), so no
token reaches the run folder.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from bench.errors import BenchError
from bench.executor.backends.base import Handler
from bench.executor.outcome import CallContext, ToolError
from bench.models import Tool


def _data(result: Any) -> Any:
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


#: Bytes read from the end of a server's stderr log to quote its last line in an error.
_TAIL_BYTES = 4096


def _log_tail(errlog: Path | None) -> str:
    """``"; its stderr ends with: <last line> (all of it: <errlog>)"`` when a stdio server
    wrote to its log ``errlog``, else ``""``: a server that exits at once usually says why
    on stderr."""
    if errlog is None:
        return ""
    try:
        with open(errlog, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - _TAIL_BYTES))
            lines = log.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    if not last:
        return ""
    from bench.errors import terminal_safe
    return f"; its stderr ends with: {terminal_safe(last)[:200]} (all of it: {errlog})"


#: The ``mcp`` SDK's client-side loggers. The stdio client logs each line a server prints on
#: its stdout that is not JSON-RPC (a stray ``print``, a traceback) with ``logger.exception``:
#: a traceback per line on bench's terminal, between its progress lines.
_SDK_LOGGERS = ("mcp.client.stdio", "mcp.client.client", "mcp.client.streamable_http",
                "mcp.shared.jsonrpc_dispatcher", "mcp.shared.dispatcher",
                "mcp.os.posix.utilities", "client")


class _ToServerLog(logging.Filter):
    """A filter on the SDK's loggers: a record logged on a backend's own thread (its event
    loop's) goes to that backend's server log as one line and is dropped, so it never reaches
    bench's terminal; other records pass."""

    def __init__(self) -> None:
        super().__init__()
        self.logs: dict[int, Path] = {}  # thread ident -> the server's log file

    def filter(self, record: logging.LogRecord) -> bool:
        path = self.logs.get(record.thread or 0)
        if path is None:
            return True
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {type(error).__name__}: {error}"
        from bench.redact import one_line
        try:
            with open(path, "a", encoding="utf-8") as log:
                log.write("bench: " + one_line(text, 2000) + "\n")
        except OSError:
            pass
        return False


_TO_SERVER_LOG = _ToServerLog()
for _name in _SDK_LOGGERS:
    logging.getLogger(_name).addFilter(_TO_SERVER_LOG)


#: Seconds to wait for a server's last stderr lines to reach its log (a child of the server
#: that keeps stderr open must not hold bench up).
_LOG_DRAIN_S = 5.0


class _RedactedLog:
    """A stdio server's stderr: the write end of a pipe (:attr:`writer`, handed to the SDK);
    a thread appends each line read from the other end to ``path``, redacted, so a secret
    the server prints never reaches the file.

    Args:
        path: the log file (appended; its folder is created).
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8")  # only its fd is used
        self._reader = os.fdopen(read_fd, "rb")
        self._path = path
        self._thread = threading.Thread(target=self._copy, name="mcp-stderr", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        from bench.redact import redact_bytes
        with self._reader, open(self._path, "ab") as log:
            for line in self._reader:  # ends when every copy of the write end is closed
                log.write(redact_bytes(line))
                log.flush()

    def close_writer(self) -> None:
        """Close bench's copy of the write end (the server holds its own until it exits)."""
        self.writer.close()

    def drain(self, timeout_s: float = _LOG_DRAIN_S) -> None:
        """Wait up to ``timeout_s`` seconds for the lines still in the pipe."""
        self._thread.join(timeout_s)


class McpBackend:
    """One MCP server: a subprocess spoken to over stdio, or a URL (Streamable HTTP).

    Args:
        command: the executable, e.g. ``sys.executable`` (None with ``url``).
        args: its arguments, e.g. ``["server.py"]``.
        env: extra environment variables for the server.
        startup_timeout_s: seconds to wait for the session to initialise.
        url: the server's Streamable HTTP endpoint instead of a command, e.g.
            ``http://127.0.0.1:8000/mcp``.
        cwd: the folder a stdio server starts in (None: this process's).
        errlog: a file that receives a stdio server's stderr, redacted line by line
            (appended; None: this process's stderr), so its log lines do not mix with
            bench's output; the SDK's own log records about this server (e.g. a stray
            non-JSON line on its stdout) are appended there too, one line each
            (:class:`_ToServerLog`).
        names: bench tool name -> the server's own name, for tools renamed at import (a
            toolset's ``server_names``; see :func:`~bench.importers.mcp_server.bench_names`).

    Raises:
        BenchError: the server could not be started or reached, or did not initialise in
            time.
    """

    def __init__(self, command: str | None = None, args: Sequence[str] = (), *,
                 env: dict[str, str] | None = None, startup_timeout_s: float = 30.0,
                 url: str | None = None, cwd: Path | None = None,
                 errlog: Path | None = None, names: Mapping[str, str] | None = None) -> None:
        from mcp import Client, StdioServerParameters

        from bench.redact import register_command_secrets
        # before it starts: a server that prints its argv (--api-key X) logs them redacted
        register_command_secrets(url if url is not None else [command or "", *args])
        if url is not None:
            from bench.toolset_config import server_label
            self._params: Any = url
            command = server_label(url)
        elif command is None:
            raise BenchError("an MCP backend needs a command or a url")
        else:
            self._params = StdioServerParameters(command=command, args=list(args), env=env,
                                                 cwd=cwd)
        self._errlog = errlog
        self._log: _RedactedLog | None = None
        self._names = dict(names or {})
        self._remote: dict[str, str] = {}  # bench name -> the server's name
        self._client_type = Client
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._client: Any = None
        self._error: BaseException | None = None
        self.tools: list[Tool] = []
        self._thread = threading.Thread(target=self._serve, name="mcp-client", daemon=True)
        self._thread.start()
        if not self._ready.wait(startup_timeout_s):
            self.close()
            raise BenchError(f"MCP server '{command}' did not start within "
                             f"{startup_timeout_s:g} s")
        if self._error is not None:
            if self._log is not None:
                self._log.drain()
            error = self._error
            while isinstance(error, BaseExceptionGroup) and error.exceptions:
                error = error.exceptions[0]
            raise BenchError(f"MCP server '{command}' failed to start: "
                             f"{type(error).__name__}: {error}".split("\n")[0]
                             + _log_tail(errlog))

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        if self._errlog is not None:  # the SDK's complaints about this server go to its log
            _TO_SERVER_LOG.logs[threading.get_ident()] = self._errlog
        try:
            self._loop.run_until_complete(self._session())
        finally:
            _TO_SERVER_LOG.logs.pop(threading.get_ident(), None)
            self._ready.set()
            self._loop.close()

    async def _session(self) -> None:
        self._stop = asyncio.Event()
        try:
            target: Any = self._params
            if self._errlog is not None and not isinstance(target, str):
                from mcp.client.stdio import stdio_client
                self._log = _RedactedLog(self._errlog)
                target = stdio_client(target, errlog=self._log.writer)
            try:
                await self._run_client(target)
            finally:
                if self._log is not None:
                    self._log.close_writer()
        except Exception as exc:  # noqa: BLE001 - reported by __init__ as one line
            self._error = exc

    async def _run_client(self, target: Any) -> None:
        """Hold one client session on ``target`` until :meth:`close`."""
        from bench.importers.mcp_server import MAX_PAGES, bench_names

        async with self._client_type(target) as client:
            if self._log is not None:
                self._log.close_writer()  # the server holds its copy; EOF when it exits
            listed: list[Any] = []
            cursor = None
            for _ in range(MAX_PAGES):  # every page, as the import read them
                page = await client.list_tools(cursor=cursor)
                listed += page.tools
                cursor = page.next_cursor
                if not cursor:
                    break
            names = bench_names([t.name for t in listed], self._names)
            self.tools = [self._tool(t, name) for t, name in zip(listed, names)]
            self._remote = {name: t.name for t, name in zip(listed, names)}
            self._client = client
            self._ready.set()
            assert self._stop is not None
            await self._stop.wait()

    @staticmethod
    def _tool(tool: Any, name: str) -> Tool:
        """The listed ``tool`` as a bench :class:`Tool` named ``name``."""
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        return Tool(name=name, description=tool.description or "",
                    input_schema=tool.input_schema or {"type": "object"},
                    permission="read" if read_only else "write")

    def call(self, name: str, arguments: dict[str, Any], ctx: CallContext) -> Any:
        """``tools/call`` on the server; raises ToolError for tool and transport failures."""
        if self._client is None:
            raise ToolError("transient", "mcp_unavailable", "the MCP session is not running")
        remaining = max(0.001, ctx.deadline - time.monotonic())
        future = asyncio.run_coroutine_threadsafe(
            self._client.call_tool(name, arguments, read_timeout_seconds=remaining), self._loop)
        try:
            result = future.result(timeout=remaining)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError("timeout", "timeout", f"the MCP server did not answer '{name}' "
                            "in time") from None
        except (OSError, EOFError, RuntimeError) as exc:
            raise ToolError("transient", "mcp_transport", f"MCP transport failed: {exc}") \
                from None
        except Exception as exc:  # noqa: BLE001 - MCPError, httpx errors: classified
            raise classify_failure(exc, name) from None
        if result.is_error:
            raise ToolError("permanent", "tool_error", " ".join(
                getattr(b, "text", "") for b in result.content).strip() or "the tool failed")
        return _data(result)

    def handlers(self) -> dict[str, Handler]:
        """One handler per tool the server lists, under its bench name; each calls the
        server's tool by the server's own name."""
        def make(tool: Tool) -> Handler:
            remote = self._remote.get(tool.name, tool.name)
            return Handler(lambda args, ctx: self.call(remote, args, ctx),
                           permission=tool.permission)
        return {tool.name: make(tool) for tool in self.tools}

    def close(self) -> None:
        """End the session and the server process."""
        if self._stop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)
        if self._log is not None:
            self._log.drain()

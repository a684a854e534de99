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

A stdio server that exits (a tool that calls ``os._exit``, a crash) or closes its stdout while
a call runs fails that call with the error class ``server_exited`` (code ``exit_<status>``,
``signal_<n>`` or ``connection_closed``), and the next call starts it again
(:meth:`McpBackend.ready`, called by the executor before each attempt and outside its
timeout), at most ``max_restarts`` times; then the run stops with one line naming the server
and its log. Before, every later call of every tool failed on the closed connection as if it
were the tool's own failure. The exit status comes from the server's process, which bench
starts itself through its own stdio transport (:mod:`bench.mcp_stdio`, a
``Transport`` as ``mcp.Client`` takes one): the SDK's ``stdio_client`` exposes no handle on
the process it starts.

The server's log is :mod:`bench.executor.backends.mcp_log`; failures, connections gone and
exits are classed by :mod:`bench.executor.backends.mcp_errors`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from bench.errors import BenchError
from bench.executor.backends.base import Handler
from bench.executor.backends.mcp_errors import (EXIT_WAIT_S, ServerExit, classify_failure,
                                                connection_closed, during, result_data)
from bench.executor.backends.mcp_log import TO_SERVER_LOG, RedactedLog, log_tail
from bench.executor.outcome import CallContext, ToolError
from bench.models import Tool
from bench.plural import count

#: Restarts of a stdio server that exited, per backend (one run); one more exit stops the run.
#: Ten lets a run get past a few crashing cases while a server that dies on every call stops
#: it early (each restart costs the server's start-up time).
MAX_RESTARTS = 10

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
            (:class:`~bench.executor.backends.mcp_log.ToServerLog`).
        names: bench tool name -> the server's own name, for tools renamed at import (a
            toolset's ``server_names``; see :func:`~bench.importers.mcp_server.bench_names`).
        name: what messages call the server, e.g. ``"toolset 'notes'"`` (None: its
            command).
        max_restarts: restarts of a stdio server that exited (:meth:`ready`), at most.

    Attributes:
        exits: every exit of a stdio server (:class:`ServerExit`), oldest first.
        restarts: how often it was started again.

    Raises:
        BenchError: the server could not be started or reached, or did not initialise in
            time.
    """

    def __init__(self, command: str | None = None, args: Sequence[str] = (), *,
                 env: dict[str, str] | None = None, startup_timeout_s: float = 30.0,
                 url: str | None = None, cwd: Path | None = None,
                 errlog: Path | None = None, names: Mapping[str, str] | None = None,
                 name: str | None = None, max_restarts: int = MAX_RESTARTS) -> None:
        from mcp import Client, StdioServerParameters

        from bench.redact import register_command_secrets, register_env_secrets
        # before it starts: a server that prints its argv (--api-key X) or its environment
        # (env = {API_TOKEN = "..."} written in clear) logs them redacted
        register_command_secrets(url if url is not None else [command or "", *args])
        register_env_secrets(env)
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
        self._log: RedactedLog | None = None
        self._names = dict(names or {})
        self._remote: dict[str, str] = {}  # bench name -> the server's name
        self._client_type = Client
        self._command = command
        self._startup_timeout_s = startup_timeout_s
        self._stdio = url is None
        self.what = f"the MCP server of {name}" if name else f"the MCP server '{command}'"
        self.max_restarts = max_restarts
        self.restarts = 0
        self.exits: list[ServerExit] = []
        self._dead: ServerExit | None = None  # the exit not restarted from yet
        self._stopped: BenchError | None = None  # restarts used up: every later call raises it
        self._generation = 0
        self._exit_lock = threading.Lock()
        self._restart_lock = threading.Lock()
        self.tools: list[Tool] = []
        self._start()

    def _start(self) -> None:
        """Start the server and its session on a new thread with its own event loop; wait
        until it has listed its tools.

        Raises:
            BenchError: it did not start, or not within the start-up timeout.
        """
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._client: Any = None
        self._process: Any = None
        self._error: BaseException | None = None
        self._generation += 1
        self._session_task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._serve, name="mcp-client", daemon=True)
        self._thread.start()
        try:
            started = self._ready.wait(self._startup_timeout_s)
        except BaseException:  # Ctrl-C, SIGTERM: the server is stopped before any call
            self._abort()
            raise
        if not started:
            self.close()
            raise BenchError(f"MCP server '{self._command}' did not start within "
                             f"{self._startup_timeout_s:g} s")
        if self._error is not None:
            if self._log is not None:
                self._log.drain()
            error = self._error
            while isinstance(error, BaseExceptionGroup) and error.exceptions:
                error = error.exceptions[0]
            raise BenchError(f"MCP server '{self._command}' failed to start: "
                             f"{type(error).__name__}: {error}".split("\n")[0]
                             + log_tail(self._errlog))

    def _serve(self) -> None:
        loop, ready = self._loop, self._ready  # this start's: a restart makes new ones
        asyncio.set_event_loop(loop)
        if self._errlog is not None:  # the SDK's complaints about this server go to its log
            TO_SERVER_LOG.logs[threading.get_ident()] = self._errlog
        try:
            self._session_task = loop.create_task(self._session())
            with contextlib.suppress(asyncio.CancelledError):  # _abort(): nothing to report
                loop.run_until_complete(self._session_task)
        finally:
            TO_SERVER_LOG.logs.pop(threading.get_ident(), None)
            ready.set()
            loop.close()

    async def _session(self) -> None:
        self._stop = asyncio.Event()
        try:
            target: Any = self._params
            if not isinstance(target, str):  # our own transport: its process tells its exit
                from bench.mcp_stdio import stdio_transport
                self._log = RedactedLog(self._errlog) if self._errlog is not None else None
                target = stdio_transport(
                    target.command, target.args, env=target.env, cwd=target.cwd,
                    errlog=self._log.writer if self._log is not None else sys.stderr,
                    started=self._started)
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

    def _abort(self) -> None:
        """Stop a start in progress: its session is cancelled, which stops the server
        (:func:`~bench.mcp_stdio.stdio_transport`'s shutdown, a few seconds
        at most); waits for that as :meth:`close` does."""
        def cancel() -> None:
            if self._session_task is not None:
                self._session_task.cancel()

        with contextlib.suppress(RuntimeError):  # the loop has closed: the session is over
            self._loop.call_soon_threadsafe(cancel)
        self._thread.join(timeout=10)

    def _started(self, process: Any) -> None:
        """Keep the server ``process`` of this start (:func:`~bench.mcp_stdio.stdio_transport`
        calls it): its ``returncode`` tells an exit."""
        self._process = process

    @staticmethod
    def _tool(tool: Any, name: str) -> Tool:
        """The listed ``tool`` as a bench :class:`Tool` named ``name``."""
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        return Tool(name=name, description=tool.description or "",
                    input_schema=tool.input_schema or {"type": "object"},
                    permission="read" if read_only else "write")

    def call(self, name: str, arguments: dict[str, Any], ctx: CallContext,
             tool: str | None = None) -> Any:
        """``tools/call`` of the server's tool ``name`` (bench's name: ``tool``).

        Raises:
            ToolError: the tool failed (``tool_error``), the transport failed, the call timed
                out, or the server exited while it ran (``server_exited``; a call that found
                it gone before it was sent: ``transient`` ``server_restarting``).
        """
        generation, client, loop, process = (self._generation, self._client, self._loop,
                                             self._process)
        if client is None:
            raise ToolError("transient", "mcp_unavailable", "the MCP session is not running")
        if self._dead is not None or (process is not None and process.returncode is not None):
            # it exited before this call was sent: not this call's doing (retried for reads)
            raise ToolError("transient", "server_restarting", "the MCP server exited before "
                            "the call was sent; bench starts it again")
        remaining = max(0.001, ctx.deadline - time.monotonic())
        try:
            future = asyncio.run_coroutine_threadsafe(
                client.call_tool(name, arguments, read_timeout_seconds=remaining), loop)
            result = future.result(timeout=remaining)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError("timeout", "timeout", f"the MCP server did not answer '{name}' "
                            "in time") from None
        except Exception as exc:  # noqa: BLE001 - MCPError, httpx errors: classified
            ended = self._ended(generation, process, tool or name, exc)
            if ended is not None:
                raise ended from None
            if isinstance(exc, (OSError, EOFError, RuntimeError)):
                raise ToolError("transient", "mcp_transport",
                                f"MCP transport failed: {exc}") from None
            raise classify_failure(exc, name) from None
        if result.is_error:
            raise ToolError("permanent", "tool_error", " ".join(
                getattr(b, "text", "") for b in result.content).strip() or "the tool failed")
        return result_data(result)

    def handlers(self) -> dict[str, Handler]:
        """One handler per tool the server lists, under its bench name; each calls the
        server's tool by the server's own name."""
        def make(tool: Tool) -> Handler:
            remote = self._remote.get(tool.name, tool.name)
            return Handler(lambda args, ctx: self.call(remote, args, ctx, tool.name),
                           permission=tool.permission,
                           ready=self.ready if self._stdio else None)
        return {tool.name: make(tool) for tool in self.tools}

    def _ended(self, generation: int, process: Any, tool: str,
               exc: BaseException) -> ToolError | None:
        """The ``server_exited`` error of a call of ``tool`` that failed with ``exc`` on the
        server's start ``generation`` (whose process was ``process``) when the server exited
        or closed its connection meanwhile, the exit recorded (:attr:`exits`); else None."""
        if not self._stdio:
            return None  # a URL server: a closed connection is the transport's, classified
        if not connection_closed(exc) and (process is None or process.returncode is None):
            return None
        deadline = time.monotonic() + EXIT_WAIT_S
        while process is not None and process.returncode is None and \
                time.monotonic() < deadline:
            time.sleep(0.02)
        returncode = process.returncode if process is not None else None
        ended = self._record_exit(generation, returncode, tool)
        return ToolError("server_exited", ended.code,
                         f"{self.what} {ended.said} while it ran '{tool}'; bench starts it "
                         "again for the next call")

    def _record_exit(self, generation: int, returncode: int | None,
                     tool: str | None) -> ServerExit:
        """The exit of start ``generation`` (recorded once; ``tool``, a call that was running,
        added to it)."""
        with self._exit_lock:
            found = next((e for e in self.exits if e.generation == generation), None)
            if found is None:
                found = ServerExit(generation, returncode)
                self.exits.append(found)
                if generation == self._generation:
                    self._dead = found
            if tool is not None and tool not in found.tools:
                found.tools.append(tool)
            return found

    def ready(self) -> None:
        """Make the server able to take a call: a stdio server that exited (during a call, or
        on its own) is started again, at most :attr:`max_restarts` times. The executor calls
        it before each attempt (:attr:`~bench.executor.backends.base.Handler.ready`), so a
        restart's time never counts against a call's timeout.

        Raises:
            BenchError: it exited once more than it may be restarted, or does not start
                again: one line naming the server and its log (every later call raises it).
        """
        process = self._process
        if self._dead is None and self._stopped is None and \
                (process is None or process.returncode is None):
            return
        with self._restart_lock:
            if self._stopped is not None:
                raise self._stopped
            process = self._process
            if self._dead is None:
                if process is None or process.returncode is None:
                    return  # another call started it again meanwhile
                self._record_exit(self._generation, process.returncode, None)
            dead = self._dead
            assert dead is not None
            where = f" (its stderr: {self._errlog})" if self._errlog is not None else ""
            if self.restarts >= self.max_restarts:
                self._stopped = BenchError(
                    f"{self.what} exited {count(len(self.exits), 'time')} "
                    f"({during(self.exits)}); bench restarted it "
                    f"{count(self.restarts, 'time')}, its limit for one run (max_restarts), "
                    f"and stopped: fix what ends it{where}")
                raise self._stopped
            self.close()
            self.restarts += 1
            self._say(f"bench: the server {dead.said} ({during([dead])}); starting it again "
                      f"(restart {self.restarts} of at most {self.max_restarts} in this run)")
            try:
                self._start()
            except BenchError as exc:
                self._stopped = BenchError(f"{self.what} {dead.said} and did not start "
                                           f"again: {exc.message}")
                raise self._stopped from None
            self._dead = None

    def _say(self, line: str) -> None:
        """Append bench's ``line`` to the server's log, if it has one."""
        if self._errlog is None:
            return
        try:
            with open(self._errlog, "a", encoding="utf-8") as log:
                log.write(line + "\n")
        except OSError:
            pass

    def close(self) -> None:
        """End the session and the server process."""
        if self._stop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)
        if self._log is not None:
            self._log.drain()

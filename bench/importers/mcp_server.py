"""Import the tools of a live MCP server (official ``mcp`` SDK): a command started over stdio,
or a URL spoken to over Streamable HTTP (the SDK's ``Client`` takes either).

A stdio server is started as a child process; either kind is initialised, asked
``tools/list`` (following ``nextCursor`` pages) and left. Each MCP tool's ``name``,
``description`` and ``inputSchema`` become a canonical tool, and its ``readOnlyHint``
annotation its permission: ``read`` only when the server says ``readOnlyHint: true``, else
``write`` (the MCP specification's default for a tool without the hint: it may change its
environment). ``title`` and ``outputSchema`` are not part of what a model is shown as a tool
and are dropped.

A server's tool name outside ``^[a-zA-Z0-9_-]{1,64}$`` (``get.weather``), or listed twice, gets
a bench name (:func:`bench_names`: ``get_weather``, ``foo_2``); the import keeps the map
(:attr:`~bench.importers.common.ImportedToolset.source_names`), ``bench init`` writes it as
``server_names`` of the toolset, and the MCP backend calls each tool by the server's own name.

A stdio server's stderr never reaches the terminal: it is captured, redacted
(:func:`bench.redact.redact`, with the secrets of its command line registered first:
:func:`bench.redact.register_command_secrets`) and returned as ``ImportedToolset.server_log``;
a failed import quotes its last line.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from bench.errors import BenchError
from bench.importers.common import ImportedToolset, make_tool, tool_name
from bench.toolset_config import server_label  # noqa: F401 - re-exported

if TYPE_CHECKING:  # mcp is an optional extra, imported where a server is started
    from mcp.types import Tool as McpTool

MAX_PAGES = 100  # a server whose cursors never end is a broken server, not a big one
_VALID_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # bench.models.Tool.name (OpenAI's rule)


def bench_names(listed: Sequence[str], declared: Mapping[str, str] | None = None) -> list[str]:
    """The bench name of each tool a server lists, in its order.

    A valid name that is free stays; a name ``declared`` (bench name -> the server's own
    name, a toolset's ``server_names``) maps the server's tool to that bench name, the
    first still unused one for a name the server lists twice; any other name gets
    :func:`~bench.importers.common.tool_name`'s (``.`` -> ``_``, ``_2`` for a name taken).
    Without ``declared`` these are the names the import gave, for the same listing.

    Args:
        listed: the ``name`` of each tool of ``tools/list``, in order (repeats allowed).
        declared: bench name -> server name, for the tools the import renamed.

    Returns:
        One unique bench name per listed tool.
    """
    declared = dict(declared or {})
    waiting: dict[str, list[str]] = {}  # server name -> its declared bench names
    for local, remote in declared.items():
        waiting.setdefault(remote, []).append(local)
    taken: set[str] = set()
    found: list[str] = []
    for remote in listed:
        candidates = [remote] if _VALID_NAME.fullmatch(remote) and \
            declared.get(remote, remote) == remote else []
        candidates += waiting.get(remote, [])
        name = next((c for c in candidates if c not in taken), None)
        if name is None:  # never a name declared for another of the server's tools
            name = tool_name(remote, taken | set(declared))
        taken.add(name)
        found.append(name)
    return found


def _clean(text: str | None) -> str:
    """Docstring-style descriptions: trailing spaces and common indentation removed."""
    import inspect

    return inspect.cleandoc(text) if text else ""


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class _SdkLog(logging.Handler):
    """Keeps the ``mcp`` SDK's warnings and errors (e.g. a traceback logged for each stdout
    line of a stdio server that is not JSON-RPC) instead of printing them; the import says
    what they mean in its one error line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.not_jsonrpc: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Record the offending line of a JSON-RPC parse failure (the SDK's stdio client
        logs one with the pydantic error, whose ``input`` is the line)."""
        exc = record.exc_info[1] if record.exc_info else None
        errors = getattr(exc, "errors", None)
        if ("JSONRPC" in record.getMessage() or "JSON-RPC" in record.getMessage()) \
                and callable(errors):
            try:
                line = errors()[0].get("input")
            except Exception:  # noqa: BLE001 - only a detail of the message
                line = None
            self.not_jsonrpc.append(f"{str(line)[:60]!r}" if line is not None else "?")


#: The loggers :class:`_SdkLog` hears: the SDK's, and bench's stdio transport's (which logs
#: a stdout line that is not JSON-RPC).
_SDK_LOGGERS = ("mcp", "bench.mcp_stdio")


@contextlib.contextmanager
def _sdk_log() -> Iterator[_SdkLog]:
    """Route the loggers of :data:`_SDK_LOGGERS` to a :class:`_SdkLog` for the duration
    (restored after)."""
    loggers = [logging.getLogger(name) for name in _SDK_LOGGERS]
    handler = _SdkLog()
    propagate = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
    try:
        yield handler
    finally:
        for logger, was in zip(loggers, propagate):
            logger.removeHandler(handler)
            logger.propagate = was


def _exit_text(returncode: int) -> str:
    """How a server process ended, from its exit status (negative: the signal that ended it,
    as :attr:`subprocess.Popen.returncode` says): ``exited with status 3``, ``was killed by
    signal 9 (SIGKILL)``."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    import signal
    try:
        name = f" ({signal.Signals(-returncode).name})"
    except ValueError:
        name = ""
    return f"was killed by signal {-returncode}{name}"


def is_url(server: str | Sequence[str]) -> bool:
    """True when ``server`` is one ``http://`` or ``https://`` URL (Streamable HTTP)."""
    return isinstance(server, str) and server.startswith(("http://", "https://"))


def server_target(server: str | Sequence[str], env: dict[str, str] | None = None,
                  cwd: Any = None) -> Any:
    """What the SDK's ``Client`` connects to: the URL itself, or ``StdioServerParameters`` for
    a command (its program looked up on ``PATH``).

    Raises:
        BenchError: an empty command.
    """
    from mcp import StdioServerParameters

    if isinstance(server, str):
        if not is_url(server):
            raise BenchError(f"an MCP server is a command (a list) or an http(s) URL, not "
                             f"'{server}'")
        return server
    if not server:
        raise BenchError("no server command given")
    program = shutil.which(server[0]) or server[0]
    return StdioServerParameters(command=program, args=list(server[1:]), env=env, cwd=cwd)


def _stdout_hint(sdk_log: _SdkLog) -> str:
    """What to add to a failure when the server printed lines that are not JSON-RPC."""
    if not sdk_log.not_jsonrpc:
        return ""
    return (f"; it printed {len(sdk_log.not_jsonrpc)} stdout line(s) that are not JSON-RPC "
            f"(first: {sdk_log.not_jsonrpc[0]}): a stdio server writes only protocol messages "
            "to stdout (logs go to stderr)")


def _stderr_tail(log: str) -> str:
    """``"; its stderr ends with: <last line>"`` for a server's (redacted) stderr ``log``, or
    "": a server that fails at start usually says why there."""
    last = next((line.strip() for line in reversed(log.splitlines()) if line.strip()), "")
    if not last:
        return ""
    from bench.errors import terminal_safe
    return f"; its stderr ends with: {terminal_safe(last)[:200]}"


def _read_log(errlog: Any) -> str:
    """The text a server wrote to the temporary file ``errlog`` (binary), redacted."""
    from bench.redact import redact
    try:
        errlog.seek(0)
        return redact(errlog.read().decode("utf-8", "replace"))
    except OSError:
        return ""


class ServerImportError(BenchError):
    """A failed import of an MCP server (:func:`import_mcp`), with what a stdio server wrote
    to its stderr meanwhile, redacted (``server_log``; "" for a URL), for ``bench init`` to
    keep (:func:`bench.importers.scaffold.kept_server_log`).

    Args:
        message: the one-line error.
        server_log: the server's stderr, redacted.
    """

    def __init__(self, message: str, server_log: str = "") -> None:
        super().__init__(message)
        self.server_log = server_log


def import_mcp(command: str | Sequence[str], *, timeout: float = 30.0) -> ImportedToolset:
    """Read the tools of an MCP server: start ``command`` over stdio, or connect to a URL.

    A stdio server's stderr is captured (never printed): redacted in ``server_log`` of the
    result, its last line quoted in an error.

    Args:
        command: the program and its arguments (e.g. ``["python", "server.py"]``), or the
            server's Streamable HTTP URL (e.g. ``"http://127.0.0.1:8000/mcp"``).
        timeout: seconds allowed for the whole exchange (start, initialize, every page).

    Raises:
        ServerImportError: the program is not found, the server fails, refuses the
            connection or times out (with the server's stderr so far).
        BenchError: no command, or a tool has an invalid schema.
    """
    listed, server_log, not_jsonrpc = _list_tools(command, timeout)
    imported = ImportedToolset(server_log=server_log)
    if not_jsonrpc:
        imported.notes.append(f"the server printed {len(not_jsonrpc)} stdout line(s) "
                              f"that are not JSON-RPC (first: {not_jsonrpc[0]}); "
                              "they were ignored")
    names = bench_names([tool.name for tool in listed])
    seen: set[str] = set()
    for index, (tool, name) in enumerate(zip(listed, names)):
        if name != tool.name:
            imported.renamed[tool.name] = name
            imported.source_names[name] = tool.name
            imported.notes.append(
                f"the server lists tool '{tool.name}' more than once: this one is '{name}' "
                f"(the server tells them apart by name only: calls of '{name}' go to its "
                f"'{tool.name}')" if tool.name in seen else
                f"tool '{tool.name}' renamed '{name}' (calls still go to '{tool.name}')")
        seen.add(tool.name)
        made = make_tool(name, _clean(tool.description), tool.input_schema,
                         source=f"MCP tools/list item {index}")
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        imported.tools.append(made if read_only else made.model_copy(
            update={"permission": "write"}))
    return imported


def _list_tools(command: str | Sequence[str], timeout: float
                ) -> tuple[list[McpTool], str, list[str]]:
    """``tools/list`` of the server (every page), within ``timeout`` seconds.

    Returns:
        (the listed tools, the server's stderr redacted, the lines it printed on stdout that
        are not JSON-RPC).

    Raises:
        ServerImportError: as :func:`import_mcp`, the server's stderr so far attached.
        BenchError: no command.
    """
    import anyio
    from mcp import Client

    from bench.mcp_stdio import stdio_transport

    if not command:
        raise BenchError("no server command given (bench import mcp --name N -- <command...>)")
    from bench.redact import register_command_secrets
    register_command_secrets(command)  # before it starts: its stderr may print its argv
    params = server_target(command)
    label = server_label(command)
    process: list[Any] = []  # the stdio server's process, once started (its exit status)

    async def fetch(errlog: Any) -> list[McpTool]:
        tools: list[McpTool] = []
        target = params if isinstance(params, str) else stdio_transport(
            params.command, params.args, env=params.env, cwd=params.cwd, errlog=errlog,
            started=process.append)
        with anyio.fail_after(timeout):
            async with Client(target, read_timeout_seconds=timeout) as client:
                cursor = None
                for _ in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
        raise BenchError(f"MCP server '{label}' sent more than {MAX_PAGES} pages of tools")

    with tempfile.TemporaryFile() as errlog, _sdk_log() as sdk_log:
        try:
            listed = anyio.run(fetch, errlog)
        except BenchError as exc:
            log = _read_log(errlog)
            raise ServerImportError(exc.message + _stderr_tail(log), log) from None
        except TimeoutError:
            log = _read_log(errlog)
            raise ServerImportError(f"MCP server '{label}' did not answer tools/list within "
                                    f"{timeout:g} s{_stdout_hint(sdk_log)}"
                                    f"{_stderr_tail(log)}", log) from None
        except OSError as exc:
            raise ServerImportError(f"cannot start MCP server '{label}': "
                                    f"{exc.strerror or exc}", _read_log(errlog)) from None
        except Exception as exc:  # the SDK raises McpError, ExceptionGroup, ValidationError...
            leaf = _leaf(exc)
            log = _read_log(errlog)
            if isinstance(leaf, OSError):  # e.g. connection refused by an HTTP server
                raise ServerImportError(f"cannot reach MCP server '{label}': "
                                        f"{leaf.strerror or leaf}", log) from None
            returncode = process[0].returncode if process else None
            if returncode is not None:  # it exited: its status says more than the SDK's error
                raise ServerImportError(
                    f"MCP server '{label}' {_exit_text(returncode)} before answering"
                    + _stdout_hint(sdk_log)
                    + (_stderr_tail(log) or "; it wrote nothing to stderr"), log) from None
            raise ServerImportError(f"MCP server '{label}' failed: {type(leaf).__name__}: "
                                    f"{leaf}".split("\n")[0] + _stdout_hint(sdk_log)
                                    + _stderr_tail(log), log) from None
        server_log = _read_log(errlog)
    return listed, server_log, list(sdk_log.not_jsonrpc)

"""Import the tools of a live MCP server (official ``mcp`` SDK): a command started over stdio,
or a URL spoken to over Streamable HTTP (the SDK's ``Client`` takes either).

A stdio server is started as a child process; either kind is initialised, asked
``tools/list`` (following ``nextCursor`` pages) and left. Each MCP tool's ``name``,
``description`` and ``inputSchema`` become a canonical tool, and its ``readOnlyHint``
annotation its permission: ``read`` only when the server says ``readOnlyHint: true``, else
``write`` (the MCP specification's default for a tool without the hint: it may change its
environment). ``title`` and ``outputSchema`` are not part of what a model is shown as a tool
and are dropped.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from typing import Any, Iterator, Sequence

from bench.errors import BenchError
from bench.importers.common import ImportedToolset, make_tool, tool_name
from bench.toolset_config import server_label  # noqa: F401 - re-exported

MAX_PAGES = 100  # a server whose cursors never end is a broken server, not a big one


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
        if "JSONRPC" in record.getMessage() and callable(errors):
            try:
                line = errors()[0].get("input")
            except Exception:  # noqa: BLE001 - only a detail of the message
                line = None
            self.not_jsonrpc.append(f"{str(line)[:60]!r}" if line is not None else "?")


@contextlib.contextmanager
def _sdk_log() -> Iterator[_SdkLog]:
    """Route the ``mcp`` logger to a :class:`_SdkLog` for the duration (restored after)."""
    logger = logging.getLogger("mcp")
    handler = _SdkLog()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


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


def import_mcp(command: str | Sequence[str], *, timeout: float = 30.0) -> ImportedToolset:
    """Read the tools of an MCP server: start ``command`` over stdio, or connect to a URL.

    Args:
        command: the program and its arguments (e.g. ``["python", "server.py"]``), or the
            server's Streamable HTTP URL (e.g. ``"http://127.0.0.1:8000/mcp"``).
        timeout: seconds allowed for the whole exchange (start, initialize, every page).

    Raises:
        BenchError: the program is not found, the server fails, refuses the connection or
            times out, or a tool has an invalid schema.
    """
    import anyio
    from mcp import Client

    if not command:
        raise BenchError("no server command given (bench import mcp --name N -- <command...>)")
    params = server_target(command)
    label = server_label(command)

    async def fetch() -> list:
        tools: list = []
        with anyio.fail_after(timeout):
            async with Client(params, read_timeout_seconds=timeout) as client:
                cursor = None
                for _ in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
        raise BenchError(f"MCP server '{label}' sent more than {MAX_PAGES} pages of tools")

    with _sdk_log() as sdk_log:
        try:
            listed = anyio.run(fetch)
        except BenchError:
            raise
        except TimeoutError:
            raise BenchError(f"MCP server '{label}' did not answer tools/list within "
                             f"{timeout:g} s{_stdout_hint(sdk_log)}") from None
        except OSError as exc:
            raise BenchError(f"cannot start MCP server '{label}': {exc.strerror or exc}") \
                from None
        except Exception as exc:  # the SDK raises McpError, ExceptionGroup, ValidationError...
            leaf = _leaf(exc)
            if isinstance(leaf, OSError):  # e.g. connection refused by an HTTP server
                raise BenchError(f"cannot reach MCP server '{label}': "
                                 f"{leaf.strerror or leaf}") from None
            raise BenchError(f"MCP server '{label}' failed: {type(leaf).__name__}: "
                             f"{leaf}".split("\n")[0] + _stdout_hint(sdk_log)) from None

    imported = ImportedToolset()
    if sdk_log.not_jsonrpc:
        imported.notes.append(f"the server printed {len(sdk_log.not_jsonrpc)} stdout line(s) "
                              f"that are not JSON-RPC (first: {sdk_log.not_jsonrpc[0]}); "
                              "they were ignored")
    for index, tool in enumerate(listed):
        name = tool_name(tool.name, (t.name for t in imported.tools))
        if name != tool.name:
            imported.renamed[tool.name] = name
            imported.notes.append(f"tool '{tool.name}' renamed '{name}'")
        made = make_tool(name, _clean(tool.description), tool.input_schema,
                         source=f"MCP tools/list item {index}")
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        imported.tools.append(made if read_only else made.model_copy(
            update={"permission": "write"}))
    return imported

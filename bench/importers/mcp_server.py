"""Import the tools of a live MCP server (stdio transport, official ``mcp`` SDK).

The server is started as a child process, initialised, asked ``tools/list`` (following
``nextCursor`` pages) and stopped. Each MCP tool's ``name``, ``description`` and
``inputSchema`` become a canonical tool; MCP's ``title``, ``annotations`` and
``outputSchema`` are not part of what a model is shown as a tool and are dropped.
"""

from __future__ import annotations

import shutil
from typing import Sequence

from bench.errors import BenchError
from bench.importers.common import ImportedToolset, make_tool, tool_name

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


def import_mcp(command: Sequence[str], *, timeout: float = 30.0) -> ImportedToolset:
    """Start ``command`` as an MCP stdio server and read its tools.

    Args:
        command: the program and its arguments (e.g. ``["python", "server.py"]``).
        timeout: seconds allowed for the whole exchange (start, initialize, every page).

    Raises:
        BenchError: the program is not found, the server fails or times out, or a tool has an
            invalid schema.
    """
    import anyio
    from mcp import Client, StdioServerParameters

    if not command:
        raise BenchError("no server command given (bench import mcp --name N -- <command...>)")
    program = shutil.which(command[0]) or command[0]
    params = StdioServerParameters(command=program, args=list(command[1:]))

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
        raise BenchError(f"MCP server '{command[0]}' sent more than {MAX_PAGES} pages of tools")

    try:
        listed = anyio.run(fetch)
    except BenchError:
        raise
    except TimeoutError:
        raise BenchError(f"MCP server '{command[0]}' did not answer tools/list within "
                         f"{timeout:g} s") from None
    except OSError as exc:
        raise BenchError(f"cannot start MCP server '{command[0]}': {exc.strerror or exc}") \
            from None
    except Exception as exc:  # the SDK raises McpError, ExceptionGroup, ValidationError...
        leaf = _leaf(exc)
        raise BenchError(f"MCP server '{command[0]}' failed: {type(leaf).__name__}: "
                         f"{leaf}".split("\n")[0]) from None

    imported = ImportedToolset()
    for index, tool in enumerate(listed):
        name = tool_name(tool.name, (t.name for t in imported.tools))
        if name != tool.name:
            imported.renamed[tool.name] = name
            imported.notes.append(f"tool '{tool.name}' renamed '{name}'")
        imported.tools.append(make_tool(name, _clean(tool.description), tool.input_schema,
                                        source=f"MCP tools/list item {index}"))
    return imported

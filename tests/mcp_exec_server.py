"""A small MCP server for the executor's MCP backend test (mcp SDK's MCPServer): over stdio,
or over Streamable HTTP on loopback with ``--http PORT`` (endpoint ``/mcp``)."""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("bench-exec-test")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_city(city: str) -> dict:
    """Canonical name of a city (Beijing and 北京 alike)."""
    names = {"beijing": "Beijing", "北京": "Beijing", "shanghai": "Shanghai", "上海": "Shanghai"}
    if city.casefold() not in names:
        raise ToolError(f"unknown city {city}")
    return {"city": names[city.casefold()]}


@server.tool()
def delete_everything(confirm: bool) -> str:
    """A destructive tool (no read-only hint)."""
    return "deleted"


@server.tool()
def add_item(title: str) -> dict:
    """Add an item to the list: appends a line to writes.log in the server's folder (a
    write whose every execution can be counted)."""
    with open("writes.log", "a", encoding="utf-8") as log:
        log.write(title + "\n")
    return {"added": title}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def broken_lookup(k: str) -> dict:
    """A read tool that fails on every call, whatever its argument."""
    raise ToolError("the backing service is down")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")

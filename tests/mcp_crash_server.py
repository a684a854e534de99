"""An MCP server over stdio with a tool that ends the server (``os._exit(3)`` mid-call, the
way a segfaulting native library or a stray ``sys.exit`` in a tool does), for the MCP
backend's restart (tests/executor/test_mcp.py, tests/importers/test_own_tools.py). Each start
appends a line to ``starts.log`` in the folder it starts in."""

import os

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("bench-crash-test")
READ = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ)
def crash(x: str) -> str:
    """End the server process with exit status 3 before answering."""
    os._exit(3)


@server.tool(annotations=READ)
def echo(x: str) -> str:
    """Answer its argument."""
    return x


@server.tool(annotations=READ)
def with_default(x: str, per_page: int = 30) -> str:
    """Answer its arguments."""
    return f"{x} {per_page}"


if __name__ == "__main__":
    with open("starts.log", "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()}\n")
    server.run("stdio")

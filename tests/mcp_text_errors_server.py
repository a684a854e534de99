"""An MCP server that answers its errors as ordinary text, without ``isError``, the way
mcp-server-sqlite does (modelcontextprotocol/servers, src/sqlite: ``Database error: ...`` for
an ``sqlite3.Error``, ``Error: ...`` for anything else): the fixture of a toolset's
``error_pattern`` (tests/importers/test_own_tools.py). Its one tool runs a SELECT on ``shop.db``
in the folder it starts in; stdio only."""

import sqlite3

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("bench-text-errors")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def read_query(query: str) -> str:
    """Execute a SELECT query on the SQLite database."""
    try:
        if not query.strip().upper().startswith("SELECT"):
            raise ValueError("Only SELECT queries are allowed for read_query")
        with sqlite3.connect("shop.db") as db:
            db.row_factory = sqlite3.Row
            return str([dict(row) for row in db.execute(query).fetchall()])
    except sqlite3.Error as exc:
        return f"Database error: {exc}"
    except Exception as exc:  # noqa: BLE001 - answered as text, as mcp-server-sqlite does
        return f"Error: {exc}"


if __name__ == "__main__":
    server.run("stdio")

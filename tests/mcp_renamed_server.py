"""An MCP server over stdio whose tools bench must rename, for tests
(``python tests/mcp_renamed_server.py``).

Built on the ``mcp`` SDK's low-level ``Server`` (``MCPServer`` refuses what this one lists):

- ``get.weather``: a name outside bench's (and OpenAI's) ``^[a-zA-Z0-9_-]{1,64}$``;
- ``foo`` twice, two definitions under one name (a server that registers a tool twice);
- ``count_rows``: a tool that only reads but says nothing about it (no ``readOnlyHint``).

With ``--plain`` it lists ``count_rows`` only (a server bench needs to rename nothing of),
with ``--empty`` no tool at all.

Every ``tools/call`` it receives is appended to ``calls.log`` in its folder (``name`` and
arguments as JSON, one line each), so a test sees which calls reached it. At start it writes
one line to stderr, with the value of ``API_TOKEN`` when that is set and its arguments (a
server that logs its configuration, secrets included); arguments other than ``--plain`` and
``--empty`` are ignored.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

_OBJECT = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    types.Tool(name="get.weather", description="The weather in a city.", input_schema=_OBJECT,
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="foo", description="Foo a city.", input_schema=_OBJECT,
               annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="foo", description="Foo a city again (a second definition).",
               input_schema=_OBJECT, annotations=types.ToolAnnotations(read_only_hint=True)),
    types.Tool(name="count_rows", description="Count the rows of a table.",
               input_schema={"type": "object", "properties": {"table": {"type": "string"}},
                             "required": ["table"]}),
]


PLAIN = "--plain" in sys.argv[1:]
EMPTY = "--empty" in sys.argv[1:]


async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[] if EMPTY else TOOLS[-1:] if PLAIN else TOOLS)


async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    with open("calls.log", "a", encoding="utf-8") as log:
        log.write(json.dumps({"name": params.name, "arguments": arguments}) + "\n")
    if params.name not in {tool.name for tool in TOOLS}:
        return types.CallToolResult(content=[types.TextContent(
            type="text", text=f"no tool {params.name}")], is_error=True)
    text = json.dumps({"tool": params.name, **arguments})
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("bench-renamed-test", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    token = os.environ.get("API_TOKEN")
    print("renamed-test server starting" + (f" with token {token}" if token else "")
          + f" argv={json.dumps(sys.argv[1:])}", file=sys.stderr, flush=True)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)

"""A small MCP server over stdio, for tests (``python tests/mcp_server.py``).

Built with the official ``mcp`` SDK (``MCPServer``, the 2.x name of FastMCP). Its tools cover
what importers and executors meet in practice: an enum, numeric bounds, an optional argument
with a default, a nested object and an array, and a tool without arguments.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-test-shop")


class Address(BaseModel):
    """A delivery address."""

    city: str = Field(description="City name.")
    postcode: str = Field(description="Postal code, digits only.", pattern=r"^[0-9]{4,10}$")


@server.tool()
def search_orders(
    keyword: Annotated[str, Field(description="Words from the product title.")],
    sort: Annotated[Literal["asc", "desc"], Field(description="Order by date.")] = "desc",
    limit: Annotated[int, Field(ge=1, le=50, description="Results per page.")] = 10,
) -> str:
    """Search the customer's orders by product words. Use it when the user describes an order
    without giving its number."""
    return f"{keyword} {sort} {limit}"


@server.tool()
def ship_to(order_id: Annotated[str, Field(description="The order number.")],
            address: Address, items: list[str]) -> str:
    """Change where an order is shipped. Use it only before the order has left the warehouse."""
    return f"{order_id} -> {address.city} ({len(items)} items)"


@server.tool()
def store_hours() -> str:
    """Tell the shop's opening hours. Use it when the user asks when the shop is open."""
    return "9-18"


if __name__ == "__main__":
    server.run()

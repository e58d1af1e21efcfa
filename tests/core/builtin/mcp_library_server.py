"""A small stdio MCP server with resources, a resource template, prompts and a task-only tool.

Built with the mcp SDK, for the client tests: ``python mcp_library_server.py``. It speaks only the
2025-era protocol versions (the ``initialize`` handshake; tasks as in 2025-11-25), as servers
older than 2026-07-28 do: ``server/discover`` gets an error answer.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.types import ToolExecution


class LibraryServer(MCPServer):
    """Marks ``long_scan`` as task-only, as a server built on MCP tasks would."""

    async def list_tools(self) -> list[Any]:
        tools = await super().list_tools()
        return [t.model_copy(update={"execution": ToolExecution(task_support="required")})
                if t.name == "long_scan" else t for t in tools]


server = LibraryServer("library", version="3.1.4")


@server.resource("notes://shopping", name="shopping", description="The shopping list", mime_type="text/plain")
def shopping() -> str:
    return "牛奶\n鸡蛋\n香蕉"


@server.resource("notes://day/{day}", name="day", description="Notes of one day")
def day(day: str) -> str:
    return f"Notes of {day}: water the plants."


@server.prompt(description="Plan meals for some days")
def weekly_menu(days: str, diet: str = "any") -> str:
    return f"Plan {days} days of dinners for a {diet} diet, using what is on the shopping list."


@server.tool()
def lookup(title: str) -> str:
    """Find a book by title."""
    return f"{title}: shelf B3"


@server.tool()
def long_scan(folder: str) -> str:
    """Scan a whole folder (runs as a task)."""
    return "done"


async def serve_2025_era() -> None:
    """Serve stdio in the handshake-only loop (no ``server/discover``), as pre-2026 servers do."""
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        options = lowlevel.create_initialization_options()
        await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=options)


if __name__ == "__main__":
    anyio.run(serve_2025_era)

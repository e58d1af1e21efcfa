"""A small MCP server over streamable HTTP or SSE, built with the mcp SDK, for the client tests.

Run: ``python mcp_http_server.py PORT [http|sse]``; it serves on 127.0.0.1:PORT until killed.
"""

from __future__ import annotations

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ToolError(reason)


def main() -> None:
    port = int(sys.argv[1])
    transport = sys.argv[2] if len(sys.argv) > 2 else "http"
    app = server.sse_app() if transport == "sse" else server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

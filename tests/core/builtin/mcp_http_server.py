"""A small MCP server built with the mcp SDK, for the client tests: tools, resources, prompts.

Run: ``python mcp_http_server.py PORT [http|sse]`` serves on 127.0.0.1:PORT until killed;
``python mcp_http_server.py stdio`` speaks over stdin/stdout (``stdio-2025``: only the 2025-era
protocol versions, the ``initialize`` handshake and ``resources/subscribe``).

Besides the ``add``/``shout``/``fail`` tools and ``snapshot`` (a caption and a PNG) it offers a text resource (``note://current``,
changed by the ``set_note`` tool, which notifies subscribers), a binary one
(``image://pixel.png``), a template (``greeting://{name}``), a ``review`` prompt with a required
and an optional argument, a ``render`` tool that declares it requires task-augmented calls and a
``batch_job`` tool that answers a plain call with -32601, as such servers do.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import (
    EmptyResult,
    SubscribeRequestParams,
    ToolExecution,
    UnsubscribeRequestParams,
)

PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

class CalcServer(MCPServer):
    """Marks ``render`` as task-only, as a server built on MCP tasks would."""

    async def list_tools(self) -> list[Any]:
        required = ToolExecution(task_support="required")
        return [t.model_copy(update={"execution": required}) if t.name == "render" else t
                for t in await super().list_tools()]


server = CalcServer("calc")
note = {"text": "first note"}
subscribers: dict[str, list[Any]] = {}


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


@server.tool()
async def set_note(text: str, ctx: Context) -> str:
    """Replace the note and notify its subscribers."""
    note["text"] = text
    for session in subscribers.get("note://current", []):  # clients of 2025-era protocol versions
        await session.send_resource_updated("note://current")
    await ctx.notify_resource_updated("note://current")  # subscriptions/listen streams (2026-07-28)
    return "noted"


@server.tool(structured_output=False)
def snapshot(label: str) -> list[Any]:
    """Take a (1x1) snapshot: a caption and the PNG."""
    return [f"snapshot {label}", Image(data=PIXEL, format="png")]


@server.tool()
def render(scene: str) -> str:
    """Render a scene (long-running: only as a task)."""
    return "rendered without a task"


@server.tool()
def batch_job(size: int) -> str:
    """Run a batch job (only as a task, but the listing does not say so)."""
    raise MCPError(-32601, "Method not found")


@server.resource("note://current", name="note", description="The current note.", mime_type="text/plain")
def current_note() -> str:
    return note["text"]


@server.resource("image://pixel.png", name="pixel", description="A 1x1 PNG.", mime_type="image/png")
def pixel() -> bytes:
    return PIXEL


@server.resource("greeting://{name}", name="greeting", description="A greeting for someone.", mime_type="text/plain")
def greeting(name: str) -> str:
    return f"Hello, {name}!"


@server.prompt(description="Review a piece of code with a focus.")
def review(code: str, focus: str = "bugs") -> str:
    return f"Please review this code, looking for {focus}:\n\n{code}"


async def _subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
    subscribers.setdefault(str(params.uri), []).append(ctx.session)
    return EmptyResult()


async def _unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
    sessions = subscribers.get(str(params.uri), [])
    if ctx.session in sessions:
        sessions.remove(ctx.session)
    return EmptyResult()


# MCPServer has no parameter for the initialize-era resources/subscribe; its low-level server takes handlers.
lowlevel = server._lowlevel_server
lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe)


async def serve_2025_era() -> None:
    """Serve stdio in the handshake-only loop (no ``server/discover``), as pre-2026 servers do."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        options = lowlevel.create_initialization_options()
        await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=options)


def main() -> None:
    if sys.argv[1] == "stdio":
        server.run("stdio")
        return
    if sys.argv[1] == "stdio-2025":
        import anyio

        anyio.run(serve_2025_era)
        return
    import uvicorn

    port = int(sys.argv[1])
    transport = sys.argv[2] if len(sys.argv) > 2 else "http"
    app = server.sse_app() if transport == "sse" else server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

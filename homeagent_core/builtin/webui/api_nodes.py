"""Nodes routes: pairing codes, the list of nodes, revoking, joining, and the nodes' WebSocket.

The ``nodes`` built-in keeps the nodes (:mod:`homeagent_core.builtin.nodes`); these routes
reach it through the plugin host. ``POST /api/v1/nodes/join`` needs no login: the one-time code
is the credential (five wrong codes a minute from one address are refused). The WebSocket
``/api/v1/nodes/ws`` is authenticated by the device token; Host and Origin are checked by the
request guard like every route.
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from homeagent_core.builtin.webui.common import ApiError, UIState, json_body, ok, require_api
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.node import WS_PATH

__all__ = ["routes"]


class _Hub(Protocol):
    async def serve(self, ws: WebSocket) -> None: ...


class _Nodes(Protocol):
    """What these routes use of the ``nodes`` plugin object."""

    hub: _Hub | None
    store: Any

    async def join(self, code: str, client: str) -> tuple[str, str]: ...

    async def listing(self) -> list[dict[str, Any]]: ...

    async def revoke(self, name: str) -> str: ...


def _nodes(state: UIState) -> _Nodes:
    host = state.services.host
    plugin = host.pm.get_plugin("nodes") if host is not None else None
    if plugin is None or getattr(plugin, "store", None) is None:
        raise ApiError(503, "the nodes built-in is not running (is it disabled?)")
    nodes: _Nodes = plugin
    return nodes


async def nodes_join(request: Request) -> Response:
    """``{"code"}`` → ``{"name", "token"}``; no login (the code is the credential)."""
    ui: UIState = request.app.state.ui
    try:
        data = await json_body(request, required={"code": str})
        name, token = await _nodes(ui).join(data["code"], ui.source_of(request))
    except ApiError as exc:
        return ok({"error": exc.message}, exc.status)
    except HomeAgentError as exc:
        status = 429 if "too many" in str(exc) else 400
        return ok({"error": str(exc)}, status)
    return ok({"name": name, "token": token})


@require_api
async def nodes_list(request: Request) -> Response:
    """``[{name, online, last_seen, capabilities, created, platform, problem}]``."""
    return ok(await _nodes(request.app.state.ui).listing())


@require_api
async def nodes_pair(request: Request) -> Response:
    """``{"name"}`` → ``{"name", "code", "expires"}`` (a one-time code valid 10 minutes)."""
    import asyncio

    data = await json_body(request, required={"name": str})
    nodes = _nodes(request.app.state.ui)
    try:
        code, expires = await asyncio.to_thread(nodes.store.pair, data["name"])
    except HomeAgentError as exc:
        raise ApiError(400, str(exc)) from None
    return ok({"name": data["name"].strip().lower(), "code": code, "expires": expires})


@require_api
async def nodes_revoke(request: Request) -> Response:
    """``{"name"}``: the token stops working and an open link is closed now."""
    data = await json_body(request, required={"name": str})
    try:
        message = await _nodes(request.app.state.ui).revoke(data["name"])
    except HomeAgentError as exc:
        raise ApiError(404, str(exc)) from None
    return ok({"name": data["name"], "message": message})


async def nodes_socket(ws: WebSocket) -> None:
    ui: UIState = ws.app.state.ui
    try:
        nodes = _nodes(ui)
    except ApiError as exc:
        await ws.send_denial_response(ok({"error": exc.message}, exc.status))
        return
    if nodes.hub is None:
        await ws.send_denial_response(ok({"error": "nodes are not running in this agent"}, 503))
        return
    await nodes.hub.serve(ws)


routes = [
    Route("/api/v1/nodes", nodes_list, methods=["GET"]),
    Route("/api/v1/nodes/pair", nodes_pair, methods=["POST"]),
    Route("/api/v1/nodes/revoke", nodes_revoke, methods=["POST"]),
    Route("/api/v1/nodes/join", nodes_join, methods=["POST"]),
    WebSocketRoute(WS_PATH, nodes_socket),
]

"""Resident sub-agent routes: who is running, what they do, their last output; send, stop, destroy."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui.common import ApiError, UIState, busy, json_body, ok, require_api
from homeagent_sdk.errors import HomeAgentError, InputQueueFull

__all__ = ["routes"]


def _residents(request: Request) -> Any:
    ui: UIState = request.app.state.ui
    return ui.kernel.residents


def _name(request: Request) -> str:
    residents = _residents(request)
    name = str(request.path_params["name"])
    if name not in residents.agents:
        known = ", ".join(residents.agents) or "none"
        raise ApiError(404, f"no resident named {name!r} (residents: {known})")
    return name


@require_api
async def residents_list(request: Request) -> Response:
    """``{"residents": [{name, role, status, activity, current, queued, last_output, ...}]}``."""
    return ok({"residents": _residents(request).list()})


@require_api
async def resident_send(request: Request) -> Response:
    """``{text}`` → queued for the resident; ``{"position": n}``. A full resident queue is
    back-pressure: 503 with ``Retry-After`` (the message was not accepted; send it again)."""
    name = _name(request)
    data = await json_body(request, required={"text": str})
    try:
        position = await _residents(request).send(name, data["text"])
    except InputQueueFull as exc:
        raise busy(exc) from None
    except HomeAgentError as exc:
        raise ApiError(400, str(exc)) from None
    return ok({"status": "queued", "name": name, "position": position})


@require_api
async def resident_stop(request: Request) -> Response:
    """Cancel the resident's work in progress and drop its queue; ``{"dropped": n}``."""
    name = _name(request)
    dropped = await _residents(request).stop(name)
    return ok({"status": "stopped", "name": name, "dropped": dropped})


@require_api
async def resident_destroy(request: Request) -> Response:
    """Remove the resident; ``?residual=keep`` (default: unfinished messages go to the main agent) or ``drop``."""
    name = _name(request)
    residual = request.query_params.get("residual", "keep")
    if residual not in ("keep", "drop"):
        raise ApiError(400, f"residual must be 'keep' or 'drop', got {residual!r}")
    result = await _residents(request).destroy(name, residual)
    return ok({"status": "destroyed", **result})


routes = [
    Route("/api/v1/residents", residents_list, methods=["GET"]),
    Route("/api/v1/residents/{name}/send", resident_send, methods=["POST"]),
    Route("/api/v1/residents/{name}/stop", resident_stop, methods=["POST"]),
    Route("/api/v1/residents/{name}", resident_destroy, methods=["DELETE"]),
]

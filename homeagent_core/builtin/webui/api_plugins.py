"""Plugin routes: list, details, enable/disable, ``.hmap`` install/upgrade, remove, reload."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui import agent_port, plugin_ops
from homeagent_core.builtin.webui.common import ApiError, UIState, ok, read_body, require_api
from homeagent_core.plugins import packages

__all__ = ["routes"]

_PLUGIN_NAME = re.compile(r"^(?!.*\.\.)[A-Za-z0-9_.-]{1,128}$")
MAX_PACKAGE_BYTES = packages.MAX_PACKAGE_BYTES


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


def _plugin_name(request: Request) -> str:
    name = str(request.path_params["name"])
    if not _PLUGIN_NAME.match(name):
        raise ApiError(400, "plugin name must be 1-128 characters of letters, digits, '.', '_' or '-' without '..'")
    return name


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name, "").lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ApiError(400, f"{name} must be true or false, got {raw!r}")


@require_api
async def plugins_list(request: Request) -> Response:
    services = _ui(request).services
    rows = plugin_ops.plugin_list(services, agent_port.plugin_rows(services))
    return ok({"plugins": rows, "disabled": sorted(services.config.disabled_plugins())})


@require_api
async def plugins_disabled(request: Request) -> Response:
    return ok({"disabled": plugin_ops.disabled_details(_ui(request).services.config)})


@require_api
async def plugin_details(request: Request) -> Response:
    name = _plugin_name(request)
    services = _ui(request).services
    rows = {r["name"]: r for r in plugin_ops.plugin_list(services, agent_port.plugin_rows(services))}
    if name not in rows:
        raise ApiError(404, f"plugin {name} is neither loaded nor installed")
    row = rows[name]
    if "package" in row:
        try:
            row["package"] = packages.plugin_details(services.data_dir, name)
        except packages.PackageError as exc:
            row["error"] = row.get("error") or str(exc)
    return ok(row)


@require_api
async def plugin_disable(request: Request) -> Response:
    name = _plugin_name(request)
    _ui(request).services.config.set_plugin_disabled(name, True, by="webui")
    return ok({"status": "disabled", "name": name, "action": "restart_required"})


@require_api
async def plugin_enable(request: Request) -> Response:
    name = _plugin_name(request)
    _ui(request).services.config.set_plugin_disabled(name, False)
    return ok({"status": "enabled", "name": name, "action": "restart_required"})


@require_api
async def plugin_install(request: Request) -> Response:
    """The raw ``.hmap`` bytes as the body; ``?overwrite=true`` upgrades an installed plugin."""
    if request.headers.get("content-type", "").startswith("multipart/"):
        raise ApiError(400, "send the .hmap file as the raw request body (Content-Type: application/zip)")
    overwrite = _flag(request, "overwrite")
    body = await read_body(request, MAX_PACKAGE_BYTES)
    if not body:
        raise ApiError(400, "empty body: send the .hmap file's bytes")
    try:
        result = await plugin_ops.install(_ui(request).services, body, overwrite=overwrite)
    except packages.PackageExistsError as exc:
        raise ApiError(409, str(exc)) from None
    except packages.PackageError as exc:
        raise ApiError(400, str(exc)) from None
    return ok(result, status=201)


@require_api
async def plugin_remove(request: Request) -> Response:
    name = _plugin_name(request)
    try:
        result = await plugin_ops.remove(_ui(request).services, name)
    except packages.PackageError as exc:
        raise ApiError(404, str(exc)) from None
    return ok(result)


@require_api
async def plugins_reload(request: Request) -> Response:
    return ok(await plugin_ops.reload(_ui(request).services))


routes = [
    Route("/api/v1/plugins", plugins_list, methods=["GET"]),
    Route("/api/v1/plugins", plugin_install, methods=["POST"]),
    Route("/api/v1/plugins/disabled", plugins_disabled, methods=["GET"]),
    Route("/api/v1/plugins/reload", plugins_reload, methods=["POST"]),
    Route("/api/v1/plugins/{name}/disable", plugin_disable, methods=["POST"]),
    Route("/api/v1/plugins/{name}/enable", plugin_enable, methods=["POST"]),
    Route("/api/v1/plugins/{name}", plugin_details, methods=["GET"]),
    Route("/api/v1/plugins/{name}", plugin_remove, methods=["DELETE"]),
]

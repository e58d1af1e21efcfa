"""Login, status, kernel snapshot, settings and plugin routes."""

from __future__ import annotations

import re
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui import agent_port
from homeagent_core.builtin.webui.auth import SESSION_COOKIE
from homeagent_core.builtin.webui.common import ApiError, UIState, error, json_body, ok, read_body, require_api
from homeagent_sdk._version import __version__
from homeagent_sdk.errors import HomeAgentError

__all__ = ["routes"]

_PLUGIN_NAME = re.compile(r"^(?!.*\.\.)[A-Za-z0-9_.-]{1,128}$")


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


async def login(request: Request) -> Response:
    ui = _ui(request)
    source = ui.source_of(request)
    wait = ui.limiter.retry_after(source)
    if wait:
        return error(429, "登录尝试过于频繁，请稍后再试", {"Retry-After": str(wait)})
    try:
        data = await json_body(request, required={"username": str, "password": str})
    except ApiError as exc:
        return error(exc.status, exc.message)
    if not ui.credentials.check_password(data["username"], data["password"]):
        ui.limiter.failed(source)
        return error(401, "用户名或密码错误")
    ui.limiter.succeeded(source)
    token = ui.sessions.create()
    response = ok({"status": "ok"})
    response.set_cookie(
        SESSION_COOKIE, token, max_age=int(ui.sessions.ttl_s), httponly=True, samesite="lax", path="/"
    )
    return response


@require_api
async def logout(request: Request) -> Response:
    _ui(request).sessions.drop(request.cookies.get(SESSION_COOKIE))
    response = ok({"status": "ok"})
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@require_api
async def status(request: Request) -> Response:
    ui = _ui(request)
    return ok(
        {
            "status": "running",
            "version": __version__,
            "sdk_version": __version__,
            "uptime": round(time.time() - ui.started_at, 1),
            "startedAt": ui.started_at,
            "llm_configured": agent_port.llm_configured(ui.services),
        }
    )


@require_api
async def kernel(request: Request) -> Response:
    ui = _ui(request)
    return ok(agent_port.kernel_status(ui.services, sse_clients=ui.hub.client_count))


# ---------------------------------------------------------------- settings


@require_api
async def settings_get(request: Request) -> Response:
    config = _ui(request).services.config
    prefix = request.query_params.get("prefix", "")
    rows = config.describe(prefix)
    meta = {}
    for row in rows:
        definition = config.definition(row["key"])
        if definition is not None:
            d = definition.to_dict()
            if d.get("secret") or d.get("type") == "password":
                d["default"] = None
            meta[row["key"]] = d
    plugins = sorted({d.key.split(".")[1] for d in config.definitions("plugin.")})
    return ok(
        {
            "settings": {r["key"]: r["value"] for r in rows},
            "meta": meta,
            "sources": {r["key"]: r["source"] for r in rows},
            "plugins": ["core", *(f"plugin.{p}" for p in plugins)],
            "disabled_plugins": sorted(config.disabled_plugins()),
        }
    )


@require_api
async def settings_put(request: Request) -> Response:
    config = _ui(request).services.config
    data = await json_body(request, required={"key": str})
    key, value = data["key"], data.get("value")
    try:
        if value is None:
            config.unset(key)
            typed: Any = config.get(key)
        else:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            typed = config.set(key, value if isinstance(value, str) else _to_text(value))
    except HomeAgentError as exc:
        raise ApiError(400, str(exc)) from None
    definition = config.definition(key)
    secret = definition is not None and (definition.secret or definition.type == "password")
    return ok(
        {
            "key": key,
            "value": ("****" if typed else "") if secret else typed,
            "restart_required": bool(definition and definition.restart_required),
        }
    )


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    import json

    return json.dumps(value, ensure_ascii=False)


# ---------------------------------------------------------------- plugins


@require_api
async def plugins_list(request: Request) -> Response:
    ui = _ui(request)
    disabled = ui.services.config.disabled_plugins()
    rows = agent_port.plugin_rows(ui.services)
    return ok({"plugins": rows, "disabled": sorted(disabled)})


def _plugin_name(request: Request) -> str:
    name = request.path_params["name"]
    if not _PLUGIN_NAME.match(name):
        raise ApiError(400, "plugin name must be 1-128 characters of letters, digits, '.', '_' or '-' without '..'")
    return name


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
    ui = _ui(request)
    body = await read_body(request, 100 * 1024 * 1024 + 1)
    if request.headers.get("content-type", "").startswith("multipart/"):
        raise ApiError(400, "send the .hmap file as the raw request body (Content-Type: application/zip)")
    if not body:
        raise ApiError(400, "empty body: send the .hmap file's bytes")
    try:
        result = await agent_port.install_package(ui.services, body)
    except HomeAgentError as exc:
        raise ApiError(400, str(exc)) from None
    return ok(result, status=201)


@require_api
async def plugin_remove(request: Request) -> Response:
    name = _plugin_name(request)
    try:
        result = await agent_port.remove_package(_ui(request).services, name)
    except HomeAgentError as exc:
        raise ApiError(404, str(exc)) from None
    return ok(result)


routes = [
    Route("/api/v1/login", login, methods=["POST"]),
    Route("/api/v1/logout", logout, methods=["POST"]),
    Route("/api/v1/status", status, methods=["GET"]),
    Route("/api/v1/kernel", kernel, methods=["GET"]),
    Route("/api/v1/settings", settings_get, methods=["GET"]),
    Route("/api/v1/settings", settings_put, methods=["PUT"]),
    Route("/api/v1/plugins", plugins_list, methods=["GET"]),
    Route("/api/v1/plugins", plugin_install, methods=["POST"]),
    Route("/api/v1/plugins/{name}/disable", plugin_disable, methods=["POST"]),
    Route("/api/v1/plugins/{name}/enable", plugin_enable, methods=["POST"]),
    Route("/api/v1/plugins/{name}", plugin_remove, methods=["DELETE"]),
]

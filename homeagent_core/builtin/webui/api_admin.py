"""Login, status, kernel snapshot, settings and persona routes."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui import agent_port, api_people
from homeagent_core.builtin.webui.auth import SESSION_COOKIE
from homeagent_core.builtin.webui.common import ApiError, UIState, error, json_body, ok, require_api, require_person
from homeagent_core.builtin.webui.i18n_routes import request_language
from homeagent_core.builtin.webui.persona import MAX_PERSONA_CHARS, MODES, PersonaFile
from homeagent_core.i18n import config_description, t
from homeagent_sdk._version import __version__
from homeagent_sdk.errors import HomeAgentError

__all__ = ["routes"]

log = logging.getLogger("homeagent.webui")

def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


async def login(request: Request) -> Response:
    """``{username, password}`` → a session cookie and the session's CSRF token.

    The source address is the socket peer (or what a trusted proxy forwarded), so a client
    cannot pick a fresh identity per try; while a source waits, even the right password is
    refused unchecked.
    """
    ui = _ui(request)
    source = ui.source_of(request)
    wait = ui.limiter.retry_after(source)
    if wait:
        return error(429, t(request_language(request), "login.too_many", seconds=wait), {"Retry-After": str(wait)})
    try:
        data = await json_body(request, required={"username": str, "password": str})
    except ApiError as exc:
        return error(exc.status, exc.message)
    who = await asyncio.to_thread(api_people.check_login, ui, data["username"], data["password"])
    if who is None:
        imposed = ui.limiter.failed(source)
        if imposed:
            log.warning(
                "web UI: repeated failed logins from %s; its next try must wait %d s (a correct login from "
                "elsewhere is not affected)", source, int(imposed),
            )
        return error(401, t(request_language(request), "login.wrong"))
    ui.limiter.succeeded(source)
    token = ui.sessions.create(*who)
    response = ok({"status": "ok", "csrf_token": ui.sessions.csrf_token(token)})
    response.set_cookie(
        SESSION_COOKIE, token, max_age=int(ui.sessions.ttl_s), httponly=True, samesite="strict", path="/",
        secure=ui.scheme_of(request) == "https",
    )
    return response


@require_person
async def session(request: Request) -> Response:
    """How this request is authenticated, who it is, and the CSRF token a cookie session must send."""
    ui = _ui(request)
    body: dict[str, Any] = {"auth": request.state.auth, **api_people.whoami(request)}
    if request.state.auth == "session":
        body["csrf_token"] = ui.sessions.csrf_token(request.cookies.get(SESSION_COOKIE))
    return ok(body)


@require_person
async def logout(request: Request) -> Response:
    _ui(request).sessions.drop(request.cookies.get(SESSION_COOKIE))
    response = ok({"status": "ok"})
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


@require_person
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
    return ok(await agent_port.kernel_status(ui.services, sse_clients=ui.hub.client_count))


# ---------------------------------------------------------------- settings


@require_api
async def settings_get(request: Request) -> Response:
    config = _ui(request).services.config
    prefix = request.query_params.get("prefix", "")
    rows = config.describe(prefix)
    language = request_language(request)
    meta = {}
    for row in rows:
        definition = config.definition(row["key"])
        if definition is not None:
            d = definition.to_dict()
            # Shown in the page's language; the search matches both (the other one is sent too).
            d["description"] = config_description(definition, language)
            d["description_zh"] = config_description(definition, "zh")
            d["description_en"] = definition.description
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


# ---------------------------------------------------------------- persona


def _persona_file(ui: UIState) -> PersonaFile:
    return PersonaFile(ui.services.data_dir)


@require_api
async def persona_get(request: Request) -> Response:
    ui = _ui(request)
    file = _persona_file(ui)
    text = await asyncio.to_thread(file.read)
    return ok(
        {
            "initialized": bool(file.choice),
            "mode": file.choice or "default",
            "current_prompt": agent_port.persona(ui.kernel),
            "file_override": text is not None,
            "file": str(file.path),
            "config_prompt": ui.services.config.get("core.agent.personal_prompt"),
        }
    )


@require_api
async def persona_post(request: Request) -> Response:
    """``{mode: default|custom|later, content?}``; a change applies from the next turn."""
    ui = _ui(request)
    data = await json_body(request, required={"mode": str})
    mode = data["mode"]
    if mode not in MODES:
        raise ApiError(400, f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    file = _persona_file(ui)
    kernel = ui.kernel
    if mode == "custom":
        content = data.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ApiError(400, "mode 'custom' needs a non-empty string field 'content' (the persona text)")
        if len(content) > MAX_PERSONA_CHARS:
            raise ApiError(400, f"content is {len(content)} characters; a persona may have {MAX_PERSONA_CHARS} at most")
        await asyncio.to_thread(file.write, content)
        agent_port.set_persona(kernel, content)
    elif mode == "default":
        await asyncio.to_thread(file.clear, "default")
        agent_port.set_persona(kernel, ui.services.config.get("core.agent.personal_prompt") or "")
    else:
        await asyncio.to_thread(file.postpone)
    return ok({"status": "ok", "mode": mode, "restart_required": False})


routes = [
    Route("/api/v1/login", login, methods=["POST"]),
    Route("/api/v1/logout", logout, methods=["POST"]),
    Route("/api/v1/session", session, methods=["GET"]),
    Route("/api/v1/status", status, methods=["GET"]),
    Route("/api/v1/kernel", kernel, methods=["GET"]),
    Route("/api/v1/settings", settings_get, methods=["GET"]),
    Route("/api/v1/settings", settings_put, methods=["PUT"]),
    Route("/api/v1/persona", persona_get, methods=["GET"]),
    Route("/api/v1/persona", persona_post, methods=["POST"]),
]

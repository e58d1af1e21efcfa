"""Builds the web UI's state and Starlette application."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from homeagent_core.builtin.webui import (
    api_admin,
    api_chat,
    api_llm,
    api_memory,
    api_nodes,
    api_pairing,
    api_people,
    api_plugins,
    api_push,
    api_reminders,
    api_residents,
    i18n_routes,
    openai_compat,
)
from homeagent_core.builtin.webui.auth import LOGINS_DB, Credentials, LoginLimiter, Logins, Sessions, parse_proxies
from homeagent_core.builtin.webui.common import (
    UIState,
    authenticated,
    busy_response,
    error,
    require_api,
    require_person_page,
)
from homeagent_core.builtin.webui.events import EventHub
from homeagent_core.builtin.webui.guard import RequestGuard, parse_allowed_hosts
from homeagent_core.builtin.webui.history import ChatHistory
from homeagent_core.builtin.webui.push import PUSH_DB, VAPID_FILE, Pusher, PushKeys, PushStore
from homeagent_core.plugins.registries import PluginRoutes
from homeagent_sdk.api import NOTIFY_EVENT
from homeagent_sdk.errors import InputQueueFull, PluginLoadError

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

__all__ = ["build_app", "build_state"]

STATIC = Path(__file__).resolve().parent / "static"
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'",
}


@dataclass
class _State(UIState):
    unsubscribe: tuple[Any, ...] = ()

    async def aclose(self) -> None:
        for stop in self.unsubscribe:
            stop()
        if self.pusher is not None:
            await self.pusher.aclose()
        if self.logins is not None:
            self.logins.close()
        await self.history.aclose()


def build_state(sdk: ScopedSDK) -> tuple[_State, dict[str, str]]:
    """Credentials, sessions, event hub and history for one web UI; returns new secrets too."""
    services = sdk.services
    assert services is not None
    preset = sdk.settings.get("api_key") or os.environ.get("HOMEAGENT_WEBUI_API_KEY", "")
    path = sdk.data_dir / "credentials.json"
    credentials, secrets = Credentials.load_or_create(
        path, username=sdk.settings.get("username"), preset_api_key=preset
    )
    try:
        proxies = parse_proxies(sdk.settings.get("trusted_proxies"))
        allowed_hosts = parse_allowed_hosts(sdk.settings.get("allowed_hosts"))
    except ValueError as exc:
        raise PluginLoadError(f"webui: {exc}", plugin_name="webui") from None
    hub = EventHub()
    history = ChatHistory(services.conversation_log)
    state = _State(
        services=services,
        credentials=credentials,
        credentials_path=path,
        sessions=Sessions(ttl_s=sdk.settings.get("session_ttl_hours") * 3600, path=sdk.data_dir / "sessions.json"),
        limiter=LoginLimiter(),
        hub=hub,
        history=history,
        proxies=proxies,
        allowed_hosts=allowed_hosts,
        plugin_dir=sdk.data_dir,
        max_body=sdk.settings.get("max_body_bytes"),
        max_upload=sdk.settings.get("max_upload_bytes"),
        started_at=time.time(),
        logins=Logins(sdk.data_dir / LOGINS_DB),
    )
    state.pusher = Pusher(
        PushKeys.load_or_create(sdk.data_dir / VAPID_FILE),
        PushStore(sdk.data_dir / PUSH_DB),
        sdk.settings.get,
        lambda: _owners(services),
        lambda: _household(services),
    )
    state.unsubscribe = (
        services.bus.subscribe(hub.handle, label="webui-sse", maxsize=10000),
        services.bus.subscribe(
            state.pusher.handle, "reminder_due", "approval_requested", "resident", NOTIFY_EVENT, label="webui-push"
        ),
    )
    return state, secrets


def _owners(services: Any) -> set[str]:
    """Who gets the owner's notifications: the admin login ("") and every person with the owner role."""
    rights = services.rights
    people = rights.people.list() if rights is not None else []
    return {""} | {p.name for p in people if p.role == "owner"}


def _household(services: Any) -> set[str]:
    """Whom a notification for the whole household reaches: the admin login and every person but guests."""
    rights = services.rights
    people = rights.people.list() if rights is not None else []
    return {""} | {p.name for p in people if p.role != "guest"}


async def login_page(request: Request) -> Response:
    if authenticated(request):
        return RedirectResponse("/", status_code=302)
    return FileResponse(STATIC / "login.html", headers=SECURITY_HEADERS)


@require_person_page
async def index(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"})


async def invite_page(request: Request) -> Response:
    """The "set your password" page of an invite link (the token stays in the URL fragment)."""
    return FileResponse(STATIC / "invite.html", headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})


async def favicon(request: Request) -> Response:
    """The tab icon (public: browsers ask for it before anyone logs in)."""
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml",
                        headers={"Cache-Control": "public, max-age=86400"})


async def not_found(request: Request, exc: Exception) -> Response:
    return error(404, "not found")


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    return error(405, "method not allowed")


def _plugin_routes(state: UIState) -> list[Mount]:
    host = state.services.host
    if host is None:
        return []
    mounts = []
    for plugin, registry in host.register_routes(PluginRoutes).items():
        routes = [Route(path, require_api(endpoint), methods=methods) for path, endpoint, methods in registry.routes]
        for path, _, _ in registry.routes:
            host.note_contribution(plugin, "routes", f"/plugins/{plugin}{path}")
        mounts.append(Mount(f"/plugins/{plugin}", routes=routes))
    return mounts


def build_app(state: UIState, *, bound_host: str = "127.0.0.1") -> Starlette:
    """The web UI app; every request first passes the Host/Origin guard (see ``guard``)."""
    routes: list[Any] = [
        Route("/", index, methods=["GET"]),
        Route("/login", login_page, methods=["GET"]),
        Route("/invite", invite_page, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
        *i18n_routes.routes,
        *api_admin.routes,
        *api_llm.routes,
        *api_plugins.routes,
        *api_chat.routes,
        *api_memory.routes,
        *api_residents.routes,
        *api_pairing.routes,
        *api_nodes.routes,
        *api_people.routes,
        *api_push.routes,
        *api_reminders.routes,
        *openai_compat.routes,
        *_plugin_routes(state),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(RequestGuard, bound_host=bound_host, allowed_hosts=state.allowed_hosts),
            Middleware(GZipMiddleware, minimum_size=2048),
        ],
        exception_handlers={404: not_found, 405: method_not_allowed, InputQueueFull: busy_response},
    )
    app.state.ui = state
    return app

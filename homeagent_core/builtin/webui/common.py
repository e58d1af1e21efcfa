"""Shared pieces of the web UI routes: state, auth guards, JSON bodies and errors."""

from __future__ import annotations

import functools
import hmac
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from homeagent_core.builtin.webui.auth import (
    CSRF_HEADER,
    SESSION_COOKIE,
    Credentials,
    LoginLimiter,
    Logins,
    Sessions,
    client_ip,
    request_scheme,
)
from homeagent_core.builtin.webui.guard import SAFE_METHODS
from homeagent_sdk.errors import InputQueueFull

if TYPE_CHECKING:
    import ipaddress

    from homeagent_core.builtin.webui.events import EventHub
    from homeagent_core.builtin.webui.history import ChatHistory
    from homeagent_core.plugins.privileged import KernelAccess
    from homeagent_core.plugins.sdk import Services

__all__ = [
    "ApiError", "UIState", "busy", "busy_response", "error", "is_json_type", "json_body", "media_type", "ok",
    "require_api", "require_person", "require_person_page", "require_web",
]

log = logging.getLogger("homeagent.webui")

Endpoint = Callable[[Request], Awaitable[Response]]


class ApiError(Exception):
    """Raised inside a route: becomes ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass
class UIState:
    """Everything the routes need, built once by the plugin at start."""

    services: Services
    credentials: Credentials
    credentials_path: Path
    sessions: Sessions
    limiter: LoginLimiter
    hub: EventHub
    history: ChatHistory
    proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
    plugin_dir: Path
    allowed_hosts: frozenset[str] = frozenset()
    max_body: int = 1024 * 1024
    max_upload: int = 64 * 1024 * 1024
    started_at: float = 0.0
    dedup: dict[str, Any] = field(default_factory=dict)
    logins: Logins | None = None
    pusher: Any = None  # push.Pusher: Web Push to people's devices (None until started)

    @property
    def kernel(self) -> KernelAccess:
        if self.services.kernel is None:
            raise ApiError(503, "the agent kernel is not running")
        return self.services.kernel

    def source_of(self, request: Request) -> str:
        """The client address: the socket peer, or what a trusted proxy forwarded."""
        peer = request.client.host if request.client else ""
        return client_ip(peer, request.headers, self.proxies)

    def scheme_of(self, request: Request) -> str:
        """``https`` when the browser's connection is TLS (directly or at a trusted proxy)."""
        peer = request.client.host if request.client else ""
        return request_scheme(request.url.scheme, peer, request.headers, self.proxies)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def ok(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data, default=str), status_code=status, media_type="application/json")


def _state(request: Request) -> UIState:
    state: UIState = request.app.state.ui
    return state


def _request_key(request: Request) -> str:
    key = request.headers.get("x-api-key", "")
    auth = request.headers.get("authorization", "")
    if not key and auth.lower().startswith("bearer "):
        key = auth[7:].strip()
    return key


def authenticated(request: Request) -> str | None:
    """How the request is authenticated: ``api_key``, ``session`` or None.

    Sets ``request.state.login`` (the person's name; ``""`` for the admin login and key) and
    ``request.state.role`` (their role, read from the registry on every request: a role change
    applies at once, and the session of a removed person is ended here).
    """
    state = _state(request)
    request.state.login, request.state.role = "", "owner"
    key = _request_key(request)
    if key and state.credentials.check_api_key(key):
        return "api_key"
    token = request.cookies.get(SESSION_COOKIE)
    who = state.sessions.person_of(token)
    if who is None:
        return None
    name, since = who
    if name:
        rights = state.services.rights
        person = rights.people.get(name) if rights is not None else None
        if person is None or person.created_at != since:
            state.sessions.drop(token)  # the person was removed (or removed and added again)
            return None
        request.state.login, request.state.role = person.name, person.role
    return "session"


def person_for_key(request: Request) -> str | None:
    """The person whose own API key (``homeagent people key``) the request carries, or None.

    A person's key opens only the chat endpoints that accept it (the OpenAI-compatible /v1 and
    the web chat: threads, chat, history, events); the key of a removed person is unknown.
    """
    rights = _state(request).services.rights
    key = _request_key(request)
    if rights is None or not key:
        return None
    person = rights.people.person_for_key(key)
    return person.name if person is not None else None


def _guarded(fn: Endpoint, *, web: bool, people: bool = False, persons: bool = False) -> Endpoint:
    @functools.wraps(fn)
    async def wrapper(request: Request) -> Response:
        method = authenticated(request)
        request.state.person = None
        if method is None and people:
            request.state.person = person_for_key(request)
            method = "person_key" if request.state.person is not None else None
        if method is None:
            if web:
                return RedirectResponse("/login", status_code=302)
            return error(401, "unauthorized")
        request.state.auth = method
        if method == "session" and request.state.role != "owner":
            if people:
                request.state.person = request.state.login  # speaks as that person, with their rights
            elif not persons:
                return error(403, (
                    f"{request.url.path} is for the owner only; {request.state.login} ({request.state.role}) "
                    "may change their own password (Account page) and use the OpenAI-compatible /v1"
                ))
        if method == "session" and request.method not in SAFE_METHODS and not _csrf_ok(request):
            return error(403, (
                "missing or wrong X-CSRF-Token header: a logged-in browser session must send the token from "
                "GET /api/v1/session with every change (scripts should use the API key instead)"
            ))
        try:
            return await fn(request)
        except ApiError as exc:
            return error(exc.status, exc.message, exc.headers)

    return wrapper


def _csrf_ok(request: Request) -> bool:
    expected = _state(request).sessions.csrf_token(request.cookies.get(SESSION_COOKIE))
    sent = request.headers.get(CSRF_HEADER, "")
    return bool(expected and sent) and hmac.compare_digest(sent.encode(), str(expected).encode())


def require_api(fn: Endpoint) -> Endpoint:
    """API route: API key or session, else 401 JSON; ApiError becomes a JSON error."""
    return _guarded(fn, web=False)


def require_person(fn: Endpoint) -> Endpoint:
    """API route any logged-in person may use (their session, password); the others are the owner's."""
    return _guarded(fn, web=False, persons=True)


def require_chat_api(fn: Endpoint) -> Endpoint:
    """Chat API route (/v1, the web chat): like :func:`require_api`, and a person's own API key is accepted too;
    ``request.state.person`` is then that person's name (None for the owner's login or key)."""
    return _guarded(fn, web=False, people=True)


def require_web(fn: Endpoint) -> Endpoint:
    """Page route: API key or session, else a redirect to /login; the owner's only."""
    return _guarded(fn, web=True)


def require_person_page(fn: Endpoint) -> Endpoint:
    """Page route any logged-in person may open (the app shell)."""
    return _guarded(fn, web=True, persons=True)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 beyond ``limit`` bytes (checked while streaming)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"request body too large (limit {limit} bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body too large (limit {limit} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def media_type(request: Request) -> str:
    """The request's ``Content-Type`` without parameters, lower-cased (``""`` when absent)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def is_json_type(kind: str) -> bool:
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


async def json_body(request: Request, *, required: dict[str, type | tuple[type, ...]] | None = None) -> dict[str, Any]:
    """Parse a JSON object body and check required fields' types; errors are 400/413/415.

    A body must say ``Content-Type: application/json``: a browser form or a ``text/plain``
    fetch from another site can send JSON-looking text, but never with that type unless the
    server allowed it through CORS (it does not).
    """
    raw = await read_body(request, _state(request).max_body)
    if raw.strip() and not is_json_type(media_type(request)):
        shown = request.headers.get("content-type") or "none"
        raise ApiError(415, f"Content-Type must be application/json for this endpoint, got {shown}")
    try:
        data = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "body must be a JSON object")
    for name, types in (required or {}).items():
        if name not in data:
            raise ApiError(400, f"missing field {name!r}")
        if not isinstance(data[name], types) or (isinstance(data[name], bool) and bool not in _as_tuple(types)):
            expected = " or ".join(t.__name__ for t in _as_tuple(types))
            raise ApiError(400, f"field {name!r} must be {expected}, got {type(data[name]).__name__}")
    return data


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def busy(exc: InputQueueFull) -> ApiError:
    """Backpressure as an HTTP error: 503 with ``Retry-After`` (the input was not accepted)."""
    return ApiError(503, str(exc), {"Retry-After": exc.retry_after_header})


async def busy_response(request: Request, exc: Exception) -> Response:
    """App-wide handler: any route whose input met a full queue answers 503, never a 500 with a traceback."""
    assert isinstance(exc, InputQueueFull)
    return JSONResponse(
        {"error": str(exc), "retry_after": int(exc.retry_after_header)},
        status_code=503,
        headers={"Retry-After": exc.retry_after_header},
    )

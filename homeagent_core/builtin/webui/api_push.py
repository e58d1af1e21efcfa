"""Push routes: the VAPID public key, subscribe / unsubscribe a browser, a test notification.

Every route needs a login (any person's session, the admin login or the API key); a
subscription belongs to the person logged in (``""`` for the admin login: the owner) and
only they can remove it or test it. The PWA files (manifest, service worker, icons) are
public: the browser fetches them without credentials.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from homeagent_core.builtin.webui.common import ApiError, UIState, json_body, ok, require_person
from homeagent_core.builtin.webui.push import TEXTS, Pusher, validate

__all__ = ["routes"]

STATIC = Path(__file__).resolve().parent / "static"


def _pusher(request: Request) -> Pusher:
    ui: UIState = request.app.state.ui
    if ui.pusher is None:
        raise ApiError(503, "push notifications are not available (the web UI has no VAPID keys)")
    pusher: Pusher = ui.pusher
    return pusher


def _me(request: Request) -> str:
    return str(getattr(request.state, "login", "") or "")


@require_person
async def push_key(request: Request) -> Response:
    """``{"public_key": <VAPID application server key>, "subscriptions": [own]}``."""
    pusher = _pusher(request)
    mine = await pusher.pool.run(pusher.store.of, [_me(request)])
    return ok({"public_key": pusher.keys.public_key, "subscriptions": [s.to_dict() for s in mine]})


@require_person
async def push_subscribe(request: Request) -> Response:
    """Body: ``PushSubscription.toJSON()`` (``{endpoint, keys: {p256dh, auth}}``) → stored for the login."""
    pusher = _pusher(request)
    body = await json_body(request, required={"endpoint": str, "keys": dict})
    try:
        sub = validate(body, _me(request))
    except ValueError as exc:
        raise ApiError(400, str(exc)) from None
    await pusher.pool.run(pusher.store.add, sub)
    return ok({"subscribed": sub.to_dict()}, status=201)


@require_person
async def push_unsubscribe(request: Request) -> Response:
    """Body: ``{endpoint}`` → the login's subscription at that endpoint is removed."""
    pusher = _pusher(request)
    body = await json_body(request, required={"endpoint": str})
    removed = await pusher.pool.run(pusher.store.remove, str(body["endpoint"]), _me(request))
    if not removed:
        raise ApiError(404, "no subscription of yours at that endpoint")
    return ok({"unsubscribed": True})


@require_person
async def push_test(request: Request) -> Response:
    """Send a test notification to the login's own devices; ``{"results": {endpoint: outcome}}``."""
    pusher = _pusher(request)
    payload: dict[str, Any] = {"title": TEXTS["test"], "body": TEXTS["test_body"], "tag": "test", "url": "/"}
    results = await pusher.send({_me(request)}, payload)
    if not results:
        raise ApiError(404, "this login has no push subscription; allow notifications on the device first")
    return ok({"results": results})


async def manifest(request: Request) -> Response:
    return FileResponse(STATIC / "manifest.webmanifest", media_type="application/manifest+json",
                        headers={"Cache-Control": "no-cache"})


async def service_worker(request: Request) -> Response:
    """The service worker, at the root so its scope is the whole UI."""
    return FileResponse(STATIC / "sw.js", media_type="text/javascript",
                        headers={"Cache-Control": "no-cache", "Service-Worker-Allowed": "/"})


routes = [
    Route("/api/v1/push/key", push_key, methods=["GET"]),
    Route("/api/v1/push/subscribe", push_subscribe, methods=["POST"]),
    Route("/api/v1/push/unsubscribe", push_unsubscribe, methods=["POST"]),
    Route("/api/v1/push/test", push_test, methods=["POST"]),
    Route("/manifest.webmanifest", manifest, methods=["GET"]),
    Route("/sw.js", service_worker, methods=["GET"]),
]

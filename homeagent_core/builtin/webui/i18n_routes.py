"""The web UI's language: the catalogue the page speaks, and the switch that picks it.

``GET /i18n/catalogue.js`` (public: the login page speaks it too) defines ``window.I18N`` —
the language picked for this request and the core catalogue's messages in it — for
``static/i18n.js`` to apply. The language is, in order: this browser's own choice (the
``homeagent_lang`` cookie the switch sets), the setting ``plugin.webui.language`` when it is
``zh`` or ``en``, and the browser's ``Accept-Language`` (``auto``, the default).

``POST /api/v1/language {"language": "auto"|"zh"|"en"}`` is the switch. There is no per-person
preference store, so the owner's choice becomes the setting (the household's default) and
everyone's choice is also kept for their browser in the cookie.
"""

from __future__ import annotations

import asyncio
import json

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from homeagent_core.builtin.webui.common import ApiError, UIState, json_body, ok, require_person
from homeagent_core.i18n import CORE, LANGUAGE_KEY, setting_value
from homeagent_sdk.i18n import SETTING_CHOICES, from_accept_language, normalize

__all__ = ["LANGUAGE_COOKIE", "request_language", "routes"]

#: The cookie that keeps one browser's own choice of language.
LANGUAGE_COOKIE = "homeagent_lang"
_YEAR = 365 * 24 * 3600


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


def configured(request: Request) -> str:
    """The setting ``plugin.webui.language``: ``auto``, ``zh`` or ``en``."""
    return setting_value(_ui(request).services.config.get(LANGUAGE_KEY, "auto"))


def request_language(request: Request) -> str:
    """The language to answer ``request`` in (``zh`` or ``en``)."""
    chosen = normalize(request.cookies.get(LANGUAGE_COOKIE))
    if chosen:
        return chosen
    setting = configured(request)
    if setting != "auto":
        return setting
    return from_accept_language(request.headers.get("accept-language"))


async def catalogue_js(request: Request) -> Response:
    language = request_language(request)
    messages = {k: v for k, v in CORE.messages(language).items() if not k.startswith("config.")}
    payload = {"lang": language, "setting": configured(request),
               "choice": normalize(request.cookies.get(LANGUAGE_COOKIE)) or "auto", "messages": messages}
    body = "window.I18N = " + json.dumps(payload, ensure_ascii=False) + ";\n"
    return Response(body, media_type="text/javascript; charset=utf-8",
                    headers={"Cache-Control": "no-cache", "Vary": "Cookie, Accept-Language",
                             "X-Content-Type-Options": "nosniff"})


@require_person
async def set_language(request: Request) -> Response:
    data = await json_body(request, required={"language": str})
    choice = data["language"].strip().lower()
    if choice not in SETTING_CHOICES:
        raise ApiError(400, f"language must be one of {', '.join(SETTING_CHOICES)}, got {data['language']!r}")
    owner = request.state.role == "owner"
    if owner:
        await asyncio.to_thread(_ui(request).services.config.set, LANGUAGE_KEY, choice)
    response = ok({"language": choice, "setting": choice if owner else configured(request),
                   "saved_for": "household" if owner else "browser"})
    if choice == "auto":
        response.delete_cookie(LANGUAGE_COOKIE, path="/", samesite="strict")
    else:
        response.set_cookie(LANGUAGE_COOKIE, choice, max_age=_YEAR, path="/", samesite="strict",
                            secure=_ui(request).scheme_of(request) == "https")
    return response


routes = [
    Route("/i18n/catalogue.js", catalogue_js, methods=["GET"]),
    Route("/api/v1/language", set_language, methods=["POST"]),
]

"""A loopback Telegram Bot API, answering like the real one (https://core.telegram.org/bots/api).

``POST /bot<token>/<method>`` with form, multipart or JSON parameters; every answer is
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code", "description"[, "parameters"]}``.
Methods: ``getMe``, ``getUpdates`` (long polling with ``offset`` / ``timeout``; a second
concurrent poll gets 409 like the real server), ``sendMessage`` (4096-character limit),
``sendChatAction``, ``sendPhoto``, ``sendDocument``, ``sendVoice``, ``getFile``,
``setWebhook`` / ``deleteWebhook`` / ``getWebhookInfo`` (HTTPS on ports 443, 80, 88 or 8443
only; while a webhook is set, ``getUpdates`` gets 409 like the real server); files under
``GET /file/bot<token>/<file_path>``. A wrong token gets 401;
``fail_next(method, 429, retry_after=...)`` and ``conflict_next()`` script errors.

With a webhook set, :meth:`FakeBotAPI.post_updates` delivers the waiting updates the way
Telegram does: one ``POST`` of the Update as JSON per update, with the webhook's secret in
``X-Telegram-Bot-Api-Secret-Token``; an update stays queued until it is answered with 2xx.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import time
from typing import Any

BOT_ID = 777000111
USERNAME = "home_helper_bot"
CONFLICT = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_SECRET_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class FakeBotAPI:
    def __init__(self, token: str) -> None:
        self.token = token
        self.port = 0
        self.updates: list[dict[str, Any]] = []
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.actions: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.errors: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.unauthorized = 0
        self.webhook: dict[str, Any] = {"url": "", "secret_token": "", "allowed_updates": None}
        self._new_update = asyncio.Event()
        self._polling = 0
        self._ids = itertools.count(1)
        self._messages = itertools.count(500)
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeBotAPI:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        app = Starlette(routes=[
            Route("/bot{token}/{method}", self._method, methods=["GET", "POST"]),
            Route("/file/bot{token}/{path:path}", self._file, methods=["GET"]),
        ])
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[sock]))
        async with asyncio.timeout(10):
            while not self._server.started:
                await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._new_update.set()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await self._task  # type: ignore[misc]

    # ------------------------------------------------------------------ scripting

    def fail_next(self, method: str, code: int, *, retry_after: int | None = None) -> None:
        params = {"retry_after": retry_after} if retry_after is not None else {}
        self.errors.setdefault(method, []).append((code, params))

    def conflict_next(self) -> None:
        self.fail_next("getUpdates", 409)

    def add_file(self, file_id: str, data: bytes, path: str) -> None:
        self.files[file_id] = (path, data)

    def push(self, message: dict[str, Any]) -> int:
        """Queue an update carrying ``message``; returns its message_id."""
        message_id = next(self._messages)
        self.updates.append({"update_id": next(self._ids), "message": {"message_id": message_id,
                                                                      "date": int(time.time()), **message}})
        self._new_update.set()
        return message_id

    def private(self, user_id: int, first_name: str, **fields: Any) -> int:
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        return self.push({"chat": {"id": user_id, "type": "private", "first_name": first_name}, "from": user,
                          **fields})

    def group(self, chat_id: int, user_id: int, first_name: str, **fields: Any) -> int:
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        return self.push({"chat": {"id": chat_id, "type": "supergroup", "title": "家庭群"}, "from": user, **fields})

    async def next_sent(self, timeout: float = 15) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            return await self.sent.get()

    # ------------------------------------------------------------------ the API

    @staticmethod
    def _error(code: int, description: str, parameters: dict[str, Any] | None = None) -> Any:
        from starlette.responses import JSONResponse

        body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
        if parameters:
            body["parameters"] = parameters
        return JSONResponse(body, status_code=code)

    @staticmethod
    def _ok(result: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({"ok": True, "result": result})

    async def _params(self, request: Any) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query_params)
        kind = request.headers.get("content-type", "")
        if kind.startswith("application/json"):
            params.update(await request.json())
        elif request.method == "POST":
            async with request.form() as form:
                for key, value in form.multi_items():
                    if hasattr(value, "read"):
                        params[key] = {"filename": value.filename, "data": await value.read()}
                    else:
                        params[key] = value
        return params

    async def _method(self, request: Any) -> Any:
        token, method = request.path_params["token"], request.path_params["method"]
        if token != self.token:
            self.unauthorized += 1
            return self._error(401, "Unauthorized")
        self.calls.append(method)
        scripted = self.errors.get(method)
        if scripted:
            code, parameters = scripted.pop(0)
            descriptions = {
                429: f"Too Many Requests: retry after {parameters.get('retry_after', 1)}",
                409: CONFLICT,
            }
            return self._error(code, descriptions.get(code, "Bad Request"), parameters)
        params = await self._params(request)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return self._error(404, "Not Found: method not found")
        return await handler(params)

    async def _api_getMe(self, params: dict[str, Any]) -> Any:
        return self._ok({"id": BOT_ID, "is_bot": True, "first_name": "Home", "username": USERNAME,
                         "can_join_groups": True, "can_read_all_group_messages": False,
                         "supports_inline_queries": False})

    @staticmethod
    def _ok_described(description: str) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({"ok": True, "result": True, "description": description})

    async def _api_setWebhook(self, params: dict[str, Any]) -> Any:
        from urllib.parse import urlsplit

        url = str(params.get("url") or "")
        if not url:
            return await self._api_deleteWebhook(params)
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            return self._error(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        if (parts.port or 443) not in (443, 80, 88, 8443):
            return self._error(400, "Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443")
        secret = str(params.get("secret_token") or "")
        if secret and (len(secret) > 256 or not set(secret) <= _SECRET_CHARS):
            return self._error(400, "Bad Request: secret token contains unallowed characters")
        self.webhook = {"url": url, "secret_token": secret, "allowed_updates": decode(params.get("allowed_updates"))}
        return self._ok_described("Webhook was set")

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> Any:
        if not self.webhook["url"]:
            return self._ok_described("Webhook is already deleted")
        self.webhook = {"url": "", "secret_token": "", "allowed_updates": None}
        return self._ok_described("Webhook was deleted")

    async def _api_getWebhookInfo(self, params: dict[str, Any]) -> Any:
        return self._ok({"url": self.webhook["url"], "has_custom_certificate": False,
                         "pending_update_count": len(self.updates) if self.webhook["url"] else 0})

    async def post_updates(self, forward_to: str, *, secret: str | None = None) -> list[int]:
        """POST every waiting update to ``forward_to`` (where a reverse proxy would send the webhook URL's
        requests), as Telegram does; answered ones (2xx) are forgotten. Returns the status codes.

        ``secret`` overrides the header (``""`` leaves it out), to play a forger.
        """
        import httpx

        assert self.webhook["url"], "no webhook is set"
        token = self.webhook["secret_token"] if secret is None else secret
        headers = {SECRET_HEADER: token} if token else {}
        statuses: list[int] = []
        async with httpx.AsyncClient(timeout=10) as client:
            for update in list(self.updates):
                response = await client.post(forward_to, json=update, headers=headers)
                statuses.append(response.status_code)
                if 200 <= response.status_code < 300:
                    self.updates.remove(update)
        return statuses

    async def _api_getUpdates(self, params: dict[str, Any]) -> Any:
        if self.webhook["url"]:
            return self._error(409, WEBHOOK_CONFLICT)
        if self._polling:
            return self._error(409, CONFLICT)
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        self._polling += 1
        try:
            deadline = time.monotonic() + timeout
            while True:
                ready = [u for u in self.updates if u["update_id"] >= offset]
                if ready or time.monotonic() >= deadline or self._server.should_exit:
                    self.updates = ready  # confirmed updates are forgotten, like the real server
                    return self._ok(ready[:100])
                self._new_update.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        await self._new_update.wait()
        finally:
            self._polling -= 1

    def _message(self, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        return {"message_id": next(self._messages), "date": int(time.time()),
                "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
                "from": {"id": BOT_ID, "is_bot": True, "first_name": "Home", "username": USERNAME}, **extra}

    async def _api_sendMessage(self, params: dict[str, Any]) -> Any:
        text = str(params.get("text", ""))
        if not text.strip():
            return self._error(400, "Bad Request: message text is empty")
        if len(text) > 4096:
            return self._error(400, "Bad Request: message is too long")
        if params.get("parse_mode"):
            return self._error(400, "Bad Request: this double only accepts plain text")
        await self.sent.put({"method": "sendMessage", "chat_id": int(params["chat_id"]), "text": text})
        return self._ok(self._message(params, text=text))

    async def _api_sendChatAction(self, params: dict[str, Any]) -> Any:
        self.actions.append({"chat_id": int(params["chat_id"]), "action": params.get("action")})
        return self._ok(True)

    async def _media(self, method: str, field: str, params: dict[str, Any]) -> Any:
        value = params.get(field)
        if value is None:
            return self._error(400, f"Bad Request: there is no {field} in the request")
        if isinstance(value, str) and value.startswith("attach://"):
            value = params.get(value[len("attach://") :])
        await self.sent.put({"method": method, "chat_id": int(params["chat_id"]), field: value})
        return self._ok(self._message(params))

    async def _api_sendPhoto(self, params: dict[str, Any]) -> Any:
        return await self._media("sendPhoto", "photo", params)

    async def _api_sendDocument(self, params: dict[str, Any]) -> Any:
        return await self._media("sendDocument", "document", params)

    async def _api_sendVoice(self, params: dict[str, Any]) -> Any:
        return await self._media("sendVoice", "voice", params)

    async def _api_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id", ""))
        if file_id not in self.files:
            return self._error(400, "Bad Request: invalid file_id")
        path, data = self.files[file_id]
        return self._ok({"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data),
                         "file_path": path})

    async def _file(self, request: Any) -> Any:
        from starlette.responses import Response

        if request.path_params["token"] != self.token:
            return self._error(401, "Unauthorized")
        for path, data in self.files.values():
            if path == request.path_params["path"]:
                return Response(data, media_type="application/octet-stream")
        return self._error(404, "Not Found")


def decode(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value

"""The webhook receiver: the plugin's own small HTTP listener for Telegram's update POSTs.

Telegram POSTs each update as JSON to the URL given to ``setWebhook`` and names the
``secret_token`` given there in the ``X-Telegram-Bot-Api-Secret-Token`` header. This listener
serves exactly one path (the path of ``webhook_url``) with ``POST`` only; a request without the
right header gets 403 and is logged. It is a listener of its own, not a route of the web UI,
so the web UI (and its admin API) can stay on loopback while a TLS reverse proxy forwards
only the webhook path here; Telegram needs HTTPS on port 443, 80, 88 or 8443.

Updates are acknowledged at once (200) and handled one by one in arrival order by a worker;
an update Telegram sends again (same ``update_id``, after a timeout) is handled once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import json
import logging
import secrets
import socket
import string
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["SECRET_HEADER", "WebhookServer", "new_secret", "valid_secret"]

log = logging.getLogger("homeagent.plugin.telegram")

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
#: An update is a JSON object of at most a few KiB; media come by file_id, never inline.
MAX_BODY = 1024 * 1024
_SECRET_CHARS = frozenset(string.ascii_letters + string.digits + "_-")


def valid_secret(secret: str) -> bool:
    """Whether Telegram accepts ``secret`` as ``secret_token``: 1-256 of ``A-Z a-z 0-9 _ -``."""
    return 1 <= len(secret) <= 256 and set(secret) <= _SECRET_CHARS


def new_secret() -> str:
    """A random secret token (43 URL-safe characters)."""
    return secrets.token_urlsafe(32)


class WebhookServer:
    """Serves ``POST <path>`` on ``host:port`` and feeds each update to ``on_update``.

    :param port: 0 picks a free port; :attr:`port` holds the bound one after :meth:`start`.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        path: str,
        secret: str,
        on_update: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self.host, self.port, self.path, self.secret = host, port, path or "/", secret
        self.on_update = on_update
        self.received = 0
        self.refused = 0
        self._seen: collections.deque[int] = collections.deque(maxlen=1000)
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
        self._server: Any = None
        self._serving: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None

    async def start(self) -> None:
        """Bind and serve.

        Raises:
            OSError: the address cannot be bound (in use, not local).
        """
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        app = Starlette(routes=[Route(self.path, self._receive, methods=["POST"])])
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False, log_config=None)
        self._server = uvicorn.Server(config)
        loop = asyncio.get_running_loop()
        self._worker = loop.create_task(self._work(), name="telegram-webhook-worker")
        self._serving = loop.create_task(self._server.serve(sockets=[sock]), name="telegram-webhook")
        async with asyncio.timeout(10):
            while not self._server.started:
                if self._serving.done():
                    self._serving.result()  # raises what stopped it
                    raise OSError(f"the webhook listener on {self.host}:{self.port} stopped at start")
                await asyncio.sleep(0.01)  # bounded by the timeout above

    async def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        for task in (self._serving, self._worker):
            if task is None:
                continue
            if task is self._worker:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError, Exception):
                async with asyncio.timeout(10):
                    await task
        if self._sock is not None:
            self._sock.close()

    async def _receive(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        sent = request.headers.get(SECRET_HEADER, "")
        if not sent or not hmac.compare_digest(sent.encode(), self.secret.encode()):
            self.refused += 1
            peer = request.client.host if request.client else "?"
            log.warning("telegram: webhook POST from %s without the right %s header; refused", peer, SECRET_HEADER)
            return JSONResponse({"error": f"missing or wrong {SECRET_HEADER}"}, status_code=403)
        body = bytearray()
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > MAX_BODY:
                return JSONResponse({"error": f"an update is at most {MAX_BODY} bytes"}, status_code=413)
        try:
            update = json.loads(body)
        except ValueError:
            update = None
        if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
            log.warning("telegram: webhook POST is not an update (a JSON object with update_id); dropped")
            return JSONResponse({"error": "expected a JSON Update object with update_id"}, status_code=400)
        if update["update_id"] in self._seen:
            return JSONResponse({"ok": True, "duplicate": True})
        try:
            self._queue.put_nowait(update)
        except asyncio.QueueFull:
            return JSONResponse({"error": "busy; send it again later"}, status_code=503)  # Telegram retries
        self._seen.append(update["update_id"])
        self.received += 1
        return JSONResponse({"ok": True})

    async def _work(self) -> None:
        while True:
            update = await self._queue.get()
            try:
                await self.on_update(update)
            except Exception:
                log.exception("telegram: webhook update %s could not be handled", update.get("update_id"))

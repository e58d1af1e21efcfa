"""The WebSocket link to a OneBot v11 implementation (NapCat, Lagrange, go-cqhttp...).

Two ways to connect, both "universal" (events and API calls on one socket):

* **forward** — we connect to the implementation's WebSocket server (``ws_url``), sending
  ``Authorization: Bearer <access_token>``; lost connections are retried with backoff;
* **reverse** — the implementation connects to us (``listen_host``:``listen_port``); its
  ``Authorization`` header (or ``?access_token=``) must carry the access token, else the
  handshake is answered 401 (missing) or 403 (wrong), as the OneBot spec says.

API calls are ``{"action", "params", "echo"}`` frames answered by
``{"status", "retcode", "data", "echo"}``; events are frames with ``post_type``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from homeagent_sdk.channels import Backoff
from homeagent_sdk.errors import PluginError

__all__ = ["OneBotError", "OneBotLink", "TokenRejected"]

log = logging.getLogger("homeagent.plugin.onebot")

#: Frames up to this size are accepted (images arrive as URLs, not inline).
MAX_FRAME = 16 * 1024 * 1024

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]


class OneBotError(PluginError):
    """An API call failed: not connected, the implementation answered ``failed``, or no answer."""


class TokenRejected(OneBotError):
    """The implementation refused our access token (HTTP 401/403 on the handshake)."""


class OneBotLink:
    """One connection (at a time) to a OneBot implementation, forward or reverse.

    :param on_event: called with every event frame (messages, notices, meta events).
    :param call_timeout: seconds to wait for an API answer.
    :param connect_wait: seconds a call waits for a connection before it fails.
    """

    def __init__(
        self,
        *,
        mode: str,
        on_event: EventHandler,
        access_token: str = "",
        ws_url: str = "",
        listen_host: str = "127.0.0.1",
        listen_port: int = 6700,
        call_timeout: float = 30.0,
        connect_wait: float = 10.0,
        backoff: Backoff | None = None,
    ) -> None:
        if mode not in ("forward", "reverse"):
            raise PluginError(f"onebot mode must be forward or reverse, not {mode!r}", plugin_name="onebot")
        if mode == "forward" and not ws_url.startswith(("ws://", "wss://")):
            raise PluginError(
                f"plugin.onebot.ws_url {ws_url!r} is not a ws:// or wss:// URL (e.g. ws://127.0.0.1:3001)",
                plugin_name="onebot",
            )
        self.mode = mode
        self.on_event = on_event
        self.access_token = access_token
        self.ws_url = ws_url
        self.listen_host, self.listen_port = listen_host, listen_port
        self.call_timeout, self.connect_wait = call_timeout, connect_wait
        self.backoff = backoff or Backoff(1.0, 60.0)
        self._ws: Any = None
        self._connected = asyncio.Event()
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._echo = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._server: Any = None
        self._events: set[asyncio.Task[None]] = set()
        self.self_id = ""
        self.connections = 0
        self.last_error = ""
        #: Set when the implementation refused the access token before ever accepting it.
        self.rejected: TokenRejected | None = None
        self._refused = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start connecting (forward) or listening (reverse); never waits for the implementation.

        Forward: connects in a background task and returns at once, so the daemon's other doors
        (the web UI, the terminal) open without waiting for QQ. Lost or failed connections are
        retried with backoff; a refused access token on the first try stops the retries, is
        logged, and every call then fails with it (:class:`TokenRejected`).
        """
        if self.mode == "reverse":
            from websockets.asyncio.server import serve

            self._server = await serve(
                self._serve_connection,
                self.listen_host,
                self.listen_port,
                process_request=self._check_request,
                max_size=MAX_FRAME,
            )
            sockets = self._server.sockets
            if sockets:
                self.listen_port = sockets[0].getsockname()[1]
            return
        self._task = asyncio.get_running_loop().create_task(self._forward_loop(), name="onebot-forward")

    async def wait_connected(self) -> None:
        """Wait until a connection is up.

        Raises:
            TokenRejected: the implementation refused the access token (no retries follow).
        """
        if not self._connected.is_set() and self.rejected is None:
            waits = [asyncio.ensure_future(self._connected.wait()), asyncio.ensure_future(self._refused.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waits:
                    waiter.cancel()
        if not self._connected.is_set() and self.rejected is not None:
            raise self.rejected

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):
                await ws.close()
        for task in list(self._events):
            task.cancel()
        self._fail_pending("the OneBot plugin is shutting down")

    # ------------------------------------------------------------------ forward

    async def _forward_loop(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        headers = {"Authorization": f"Bearer {self.access_token}"} if self.access_token else {}
        log.info("onebot: connecting to %s", self.ws_url)
        while True:
            try:
                async with connect(
                    self.ws_url, additional_headers=headers, max_size=MAX_FRAME, open_timeout=10, proxy=None
                ) as ws:
                    self.backoff.reset()
                    await self._run(ws)
            except asyncio.CancelledError:
                raise
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
                    error = TokenRejected(
                        f"the OneBot implementation at {self.ws_url} refused the access token (HTTP {status}); "
                        "set plugin.onebot.access_token to the token configured in the implementation "
                        "(NapCat: network settings, token)",
                        plugin_name="onebot",
                    )
                    self.last_error = str(error)
                    log.error("onebot: %s", error)
                    if self.connections == 0:  # never accepted: retrying cannot help until it is fixed
                        self.rejected = error
                        self._refused.set()
                        return
                else:
                    self.last_error = f"handshake answered HTTP {status}"
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.info("onebot: connection to %s lost or failed: %s", self.ws_url, self.last_error)
            await self.backoff.sleep()

    # ------------------------------------------------------------------ reverse

    def _check_request(self, connection: Any, request: Any) -> Any:
        """Reject a reverse connection from a web page (403: browsers always send ``Origin``,
        OneBot implementations never do) or whose token is missing (401) or wrong (403)."""
        if request.headers.get("Origin"):
            log.warning("onebot: reverse connection from a web page (Origin %s) refused", request.headers["Origin"])
            return connection.respond(HTTPStatus.FORBIDDEN, "connections from web pages are refused\n")
        if not self.access_token:
            return None
        given = ""
        auth = request.headers.get("Authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:]
        elif auth.lower().startswith("token "):
            given = auth[6:]
        else:
            given = (parse_qs(urlsplit(request.path).query).get("access_token") or [""])[0]
        if not given:
            log.warning("onebot: reverse connection without an access token refused")
            return connection.respond(HTTPStatus.UNAUTHORIZED, "access token missing\n")
        if not hmac.compare_digest(given.encode(), self.access_token.encode()):
            log.warning("onebot: reverse connection with a wrong access token refused")
            return connection.respond(HTTPStatus.FORBIDDEN, "access token wrong\n")
        return None

    async def _serve_connection(self, ws: Any) -> None:
        self_id = ws.request.headers.get("X-Self-ID", "") if ws.request is not None else ""
        if self_id:
            self.self_id = str(self_id)
        previous = self._ws
        if previous is not None:
            log.info("onebot: a new reverse connection replaces the old one")
            with contextlib.suppress(Exception):
                await previous.close()
        await self._run(ws)

    # ------------------------------------------------------------------ both

    async def _run(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        self._ws = ws
        self.connections += 1
        self._connected.set()
        try:
            async for raw in ws:
                self._dispatch(raw)
        except ConnectionClosed as exc:
            self.last_error = f"connection closed ({exc})"
        finally:
            if self._ws is ws:
                self._ws = None
                self._connected.clear()
                self._fail_pending("the connection to the OneBot implementation was lost before it answered")

    def _dispatch(self, raw: str | bytes) -> None:
        try:
            frame = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            log.warning("onebot: dropped a frame that is not JSON (%d bytes)", len(raw))
            return
        if not isinstance(frame, dict):
            log.warning("onebot: dropped a frame that is not a JSON object")
            return
        echo = frame.get("echo")
        if echo is not None and "post_type" not in frame:
            future = self._pending.pop(str(echo), None)
            if future is not None and not future.done():
                future.set_result(frame)
            return
        if "post_type" in frame:
            task = asyncio.get_running_loop().create_task(self._deliver(frame))
            self._events.add(task)
            task.add_done_callback(self._events.discard)
            return
        log.warning("onebot: dropped a frame that is neither an event nor an API answer: %.200s", raw)

    async def _deliver(self, frame: dict[str, Any]) -> None:
        try:
            await self.on_event(frame)
        except Exception:
            log.exception("onebot: handling an event failed: %.300s", json.dumps(frame, ensure_ascii=False))

    def _fail_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(OneBotError(reason, plugin_name="onebot"))

    @property
    def connected(self) -> bool:
        return self._ws is not None

    async def call(self, action: str, params: dict[str, Any] | None = None) -> Any:
        """Call an API action; returns its ``data``.

        Raises:
            OneBotError: no connection within ``connect_wait``, the connection dropped before
                the answer, no answer within ``call_timeout``, or ``status`` was not ``ok``.
        """
        if self.rejected is not None:
            raise OneBotError(f"{action}: {self.rejected}", plugin_name="onebot")
        try:
            async with asyncio.timeout(self.connect_wait):
                await self.wait_connected()
        except TokenRejected as exc:
            raise OneBotError(f"{action}: {exc}", plugin_name="onebot") from None
        except TimeoutError:
            raise OneBotError(
                f"{action}: not connected to the OneBot implementation ({self.last_error or 'no connection yet'})",
                plugin_name="onebot",
            ) from None
        ws = self._ws
        echo = f"ha-{next(self._echo)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[echo] = future
        try:
            await ws.send(json.dumps({"action": action, "params": params or {}, "echo": echo}, ensure_ascii=False))
            async with asyncio.timeout(self.call_timeout):
                answer = await future
        except TimeoutError:
            raise OneBotError(f"{action}: no answer within {self.call_timeout:g} s", plugin_name="onebot") from None
        except OneBotError:
            raise
        except Exception as exc:
            raise OneBotError(f"{action}: {type(exc).__name__}: {exc}", plugin_name="onebot") from None
        finally:
            self._pending.pop(echo, None)
        if answer.get("status") not in ("ok", "async") or answer.get("retcode", 0) not in (0, 1):
            detail = answer.get("wording") or answer.get("message") or answer.get("msg") or ""
            raise OneBotError(
                f"{action} failed: retcode {answer.get('retcode')} {detail}".strip(), plugin_name="onebot"
            )
        return answer.get("data")

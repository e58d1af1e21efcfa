"""A client of Home Assistant's WebSocket API: auth, commands, ``state_changed`` events, reconnects.

One connection (``ws[s]://host:port/api/websocket``) carries every command (``get_states``,
the registries, ``call_service``, ``history/history_during_period``) and the event
subscription. :meth:`HAClient.start` connects once and raises :class:`HAAuthError` for a token
Home Assistant refused and :class:`HAUnavailable` for a server it cannot reach, so the plugin
fails to start with a message that says which. After that a dropped connection fails the
commands in flight at once (:class:`HAUnavailable`, naming the URL) and is opened again in the
background with backoff; ``on_connect`` runs after each reconnect (the plugin reloads its
entities and subscribes again).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from homeagent_sdk.channels import RECONNECT_MAX_S, Backoff

__all__ = ["HAAuthError", "HAClient", "HAError", "HAUnavailable", "websocket_url"]

log = logging.getLogger("homeagent.plugin.homeassistant")

MAX_MESSAGE = 64 * 1024 * 1024


class HAError(Exception):
    """Home Assistant answered a command with an error."""


class HAAuthError(HAError):
    """Home Assistant refused the access token."""


class HAUnavailable(HAError):
    """Home Assistant cannot be reached (now)."""


def websocket_url(url: str) -> str:
    """``http://host:8123`` → ``ws://host:8123/api/websocket`` (a ws(s) URL is kept as it is).

    Raises:
        ValueError: not an http(s) or ws(s) URL with a host.
    """
    parts = urlsplit(url.strip())
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.hostname:
        raise ValueError(f"{url!r} is not a Home Assistant URL; it looks like http://homeassistant.local:8123")
    path = parts.path.rstrip("/")
    if not path.endswith("/api/websocket"):
        path += "/api/websocket"
    return urlunsplit((scheme, parts.netloc, path, "", ""))


class HAClient:
    """One WebSocket connection to Home Assistant, kept open."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        on_event: Callable[[dict[str, Any]], None],
        on_connect: Callable[[], Awaitable[None]],
        backoff: Backoff | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.url = websocket_url(url)
        self._token = token
        self._on_event = on_event
        self._on_connect = on_connect
        self.timeout = timeout
        self.backoff = backoff or Backoff(1.0, float(RECONNECT_MAX_S))
        self.version = ""
        self.last_error = ""
        self.connected = asyncio.Event()
        self._ws: Any = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._subscriptions: set[int] = set()
        self._subscribed: set[str] = set()  # event types followed on this connection
        self._runner: asyncio.Task[None] | None = None
        self._reload: asyncio.Task[None] | None = None
        self._closing = False

    # ------------------------------------------------------------------ connection

    async def _open(self) -> None:
        """Connect and authenticate once.

        Raises:
            HAAuthError: the token was refused.
            HAUnavailable: nothing answers at the URL, or it does not speak the API.
        """
        from websockets.asyncio.client import connect
        from websockets.exceptions import WebSocketException

        try:
            ws = await asyncio.wait_for(connect(self.url, max_size=MAX_MESSAGE, open_timeout=self.timeout),
                                        self.timeout)
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise HAUnavailable(f"cannot reach Home Assistant at {self.url}: {_reason(exc)}") from None
        try:
            hello = json.loads(await asyncio.wait_for(ws.recv(), self.timeout))
            if hello.get("type") != "auth_required":
                raise HAUnavailable(f"{self.url} does not speak Home Assistant's WebSocket API (it sent {hello!r:.80})")
            await ws.send(json.dumps({"type": "auth", "access_token": self._token}))
            answer = json.loads(await asyncio.wait_for(ws.recv(), self.timeout))
        except (OSError, TimeoutError, WebSocketException, ValueError) as exc:
            await ws.close()
            raise HAUnavailable(f"Home Assistant at {self.url} closed during login: {_reason(exc)}") from None
        except BaseException:
            await ws.close()
            raise
        if answer.get("type") != "auth_ok":
            await ws.close()
            raise HAAuthError(
                f"Home Assistant at {self.url} refused the access token ({answer.get('message') or answer.get('type')})"
            )
        self.version = str(answer.get("ha_version", ""))
        self._ws = ws

    async def start(self) -> None:
        """Connect, run ``on_connect``, then keep the connection (and reconnect) in the background.

        Raises:
            HAAuthError: the token was refused.
            HAUnavailable: Home Assistant cannot be reached.
        """
        await self._open()
        self._runner = asyncio.get_running_loop().create_task(self._run(), name="homeassistant-ws")
        self.connected.set()
        await self._on_connect()

    async def _run(self) -> None:
        first = True
        while not self._closing:
            if not first:
                try:
                    await self._open()
                except HAAuthError as exc:
                    self.last_error = str(exc)
                    log.error("homeassistant: %s; fix plugin.homeassistant.token", exc)
                    await self.backoff.sleep()
                    continue
                except HAUnavailable as exc:
                    self.last_error = str(exc)
                    log.info("homeassistant: %s; trying again", exc)
                    await self.backoff.sleep()
                    continue
                self.connected.set()
                log.info("homeassistant: connected again to %s", self.url)
                self._spawn_on_connect()
            first = False
            self.backoff.reset()
            self.last_error = ""
            await self._read()
            self.connected.clear()
            self._ws = None
            self._subscriptions.clear()
            self._subscribed.clear()
            self._fail_pending(HAUnavailable(
                f"Home Assistant at {self.url} went away; the command may not have run. HomeAgent reconnects "
                "on its own: try again in a moment"
            ))
            if not self._closing:
                self.last_error = f"connection to {self.url} lost"
                log.warning("homeassistant: connection to %s lost; reconnecting", self.url)

    def _spawn_on_connect(self) -> None:
        async def run() -> None:
            # Home Assistant answers its WebSocket before every integration is loaded again: a
            # reload that fails is tried again (1 s, doubling, at most 30 s) while connected.
            delay = 1.0
            while not self._closing and self.connected.is_set():
                try:
                    await self._on_connect()
                    return
                except HAError as exc:
                    log.warning("homeassistant: reloading after the reconnect failed: %s; trying again in %.0f s",
                                exc, delay)
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)

        self._reload = asyncio.get_running_loop().create_task(run(), name="homeassistant-reload")

    async def _read(self) -> None:
        from websockets.exceptions import WebSocketException

        ws = self._ws
        try:
            async for raw in ws:
                try:
                    message = json.loads(raw)
                except ValueError:
                    log.warning("homeassistant: ignored a message that is not JSON")
                    continue
                self._dispatch(message)
        except (OSError, WebSocketException) as exc:
            log.info("homeassistant: read ended: %s", _reason(exc))

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        ident = message.get("id")
        if kind == "event" and ident in self._subscriptions:
            try:
                self._on_event(message.get("event") or {})
            except Exception:
                log.exception("homeassistant: handling an event failed")
            return
        if kind == "result" and isinstance(ident, int):
            future = self._pending.pop(ident, None)
            if future is None or future.done():
                return
            if message.get("success"):
                future.set_result(message.get("result"))
            else:
                error = message.get("error") or {}
                future.set_exception(HAError(f"{error.get('code', 'error')}: {error.get('message', '')}".strip()))

    def _fail_pending(self, error: HAError) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    # ------------------------------------------------------------------ commands

    async def command(self, kind: str, **payload: Any) -> Any:
        """Send one command and wait for its result.

        Raises:
            HAUnavailable: not connected, or the connection dropped before the answer.
            HAError: Home Assistant answered with an error.
        """
        ws = self._ws
        if ws is None or not self.connected.is_set():
            raise HAUnavailable(
                f"Home Assistant at {self.url} is not connected ({self.last_error or 'connecting'}); HomeAgent "
                "keeps trying to reconnect: try again in a moment"
            )
        ident = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        try:
            await ws.send(json.dumps({"id": ident, "type": kind, **payload}))
            return await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            raise HAUnavailable(
                f"Home Assistant at {self.url} did not answer {kind} within {self.timeout:g} s"
            ) from None
        except (OSError, _ws_errors()) as exc:
            raise HAUnavailable(f"Home Assistant at {self.url} went away during {kind}: {_reason(exc)}") from None
        finally:
            self._pending.pop(ident, None)

    async def subscribe(self, event_type: str) -> None:
        """Follow ``event_type`` events (they go to ``on_event``); once per connection.

        Raises:
            HAUnavailable: not connected, or no answer in time.
            HAError: Home Assistant refused the subscription.
        """
        if event_type in self._subscribed:
            return
        ident = next(self._ids)
        ws = self._ws
        if ws is None:
            raise HAUnavailable(f"Home Assistant at {self.url} is not connected")
        self._subscriptions.add(ident)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        try:
            await ws.send(json.dumps({"id": ident, "type": "subscribe_events", "event_type": event_type}))
            await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            self._subscriptions.discard(ident)
            raise HAUnavailable(f"Home Assistant at {self.url} did not confirm following {event_type}") from None
        except (OSError, _ws_errors()) as exc:
            self._subscriptions.discard(ident)
            raise HAUnavailable(f"Home Assistant at {self.url} went away while following {event_type}: "
                                f"{_reason(exc)}") from None
        except BaseException:
            self._subscriptions.discard(ident)
            raise
        finally:
            self._pending.pop(ident, None)
        self._subscribed.add(event_type)

    async def close(self) -> None:
        self._closing = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        for task in (self._runner, self._reload):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._fail_pending(HAUnavailable("the Home Assistant plugin stopped"))


def _ws_errors() -> type[Exception]:
    from websockets.exceptions import WebSocketException

    return WebSocketException


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

"""``homeagent node join`` and ``homeagent node serve``: the device's side of the link.

``join`` trades a one-time pairing code for a device token (``POST /api/v1/nodes/join``) and
writes ``node.json`` and ``token``. ``serve`` keeps one outbound WebSocket to the daemon's web
port: it says hello with the capabilities the node enables, answers calls (each in its own
task, with a timeout), and reconnects with exponential backoff and jitter whenever the link
drops (a daemon restart included). A 401 means the token was revoked or is unknown: the node
says so and stops, since retrying cannot help.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from homeagent_core.node.caps_media import build_capabilities
from homeagent_core.node.config import DEFAULT_CAPABILITIES, NodeConfig
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.node import (
    WS_PATH,
    CapabilityError,
    NodeCapability,
    ProtocolError,
    decode_frame,
    hello_frame,
    result_frame,
)

__all__ = ["NodeClient", "TokenRefused", "join", "ws_url"]

log = logging.getLogger("homeagent.node")

#: Seconds a capability call may run on the node (the home side has its own timeout too).
CALL_TIMEOUT = 120.0
#: Largest frame the node accepts from the daemon.
MAX_FRAME = 1024 * 1024
#: Longest wait between reconnect attempts.
MAX_BACKOFF = 30.0


class TokenRefused(HomeAgentError):
    """The daemon answered 401: this node's token was revoked or is unknown."""


def ws_url(base: str) -> str:
    """``http://host:8080`` → ``ws://host:8080/api/v1/nodes/ws`` (``https`` → ``wss``).

    Raises:
        HomeAgentError: not an http(s) or ws(s) URL.
    """
    parts = urlsplit(base.strip())
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise HomeAgentError(f"{base!r} is not the home's web address; write it like http://192.168.1.10:8080")
    return urlunsplit((scheme, parts.netloc, WS_PATH, "", ""))


def join(url: str, code: str, folder: Path, *, timeout: float = 30.0) -> NodeConfig:
    """Trade ``code`` for a device token at the daemon on ``url``; writes ``node.json`` and ``token``.

    Raises:
        HomeAgentError: the daemon is unreachable or refused the code (its reason is given).
    """
    import httpx

    ws_url(url)  # validates the address before anything is sent
    base = url.strip().rstrip("/")
    try:
        response = httpx.post(f"{base}/api/v1/nodes/join", json={"code": code.strip()}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise HomeAgentError(f"cannot reach the home daemon at {base}: {exc}") from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code != 200 or not isinstance(body, dict) or "token" not in body:
        reason = body.get("error") if isinstance(body, dict) else None
        raise HomeAgentError(f"the home daemon refused to pair: {reason or f'HTTP {response.status_code}'}")
    try:
        config = NodeConfig.load(folder)
    except HomeAgentError:
        config = NodeConfig(folder, capabilities=json.loads(json.dumps(DEFAULT_CAPABILITIES)))
    config.name, config.url = str(body["name"]), base
    config.save()
    config.save_token(str(body["token"]))
    return config


class NodeClient:
    """One node's link to its home: connect, hello, answer calls, reconnect."""

    def __init__(self, config: NodeConfig, capabilities: list[NodeCapability], *,
                 max_backoff: float = MAX_BACKOFF, say: Any = None) -> None:
        self.config = config
        self.caps = {c.name: c for c in capabilities}
        self.max_backoff = max_backoff
        self.say = say or (lambda text: print(text, flush=True))
        self.tasks: set[asyncio.Task[None]] = set()
        self.connected_at = 0.0

    @classmethod
    def from_folder(cls, folder: Path, **kwargs: Any) -> NodeClient:
        config = NodeConfig.load(folder)
        config.token()  # no token: say so now, not on every reconnect
        caps, notes = build_capabilities(config)
        client = cls(config, caps, **kwargs)
        for note in notes:
            client.say(f"not offered: {note}")
        return client

    def platform(self) -> dict[str, Any]:
        import platform

        return {"host": socket.gethostname(), "system": platform.system(), "machine": platform.machine()}

    async def run_forever(self) -> None:
        """Stay connected until cancelled.

        Raises:
            TokenRefused: the daemon answered 401 (revoked or unknown token).
        """
        from websockets.exceptions import ConnectionClosed, InvalidStatus

        attempt = 0
        while True:
            try:
                await self.session()
                why = "the home closed the link"
            except InvalidStatus as exc:
                status = exc.response.status_code
                body = exc.response.body.decode(errors="replace") if exc.response.body else ""
                if status == 401:
                    raise TokenRefused(
                        f"the home refused this node's token: {_error_of(body)}; "
                        "then join again here with `homeagent node join URL CODE`"
                    ) from None
                why = f"HTTP {status}: {_error_of(body)}"
            except ConnectionClosed as exc:
                why = (f"the home closed the link ({exc.rcvd.code}: {exc.rcvd.reason or 'no reason'})"
                       if exc.rcvd is not None else "the link dropped")
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                why = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # a protocol error of the websockets library, a closed link
                why = f"{type(exc).__name__}: {exc}"
            # A link that lived a while starts the backoff afresh; one cut right after its hello does not.
            attempt = 0 if self.connected_at and time.monotonic() - self.connected_at > 10 else attempt + 1
            self.connected_at = 0.0
            delay = min(self.max_backoff, 0.5 * 2 ** min(attempt, 8)) * random.uniform(0.5, 1.0)
            self.say(f"disconnected ({why}); reconnecting in {delay:.1f}s")
            await asyncio.sleep(delay)

    async def session(self) -> None:
        """One connection: hello, then answer calls until it closes."""
        from websockets.asyncio.client import connect

        headers = {"Authorization": f"Bearer {self.config.token()}"}
        async with connect(ws_url(self.config.url), additional_headers=headers, max_size=MAX_FRAME,
                           open_timeout=15, ping_interval=20, ping_timeout=20, close_timeout=5) as ws:
            await ws.send(hello_frame(self.config.name, list(self.caps.values()), self.platform()))
            welcome = decode_frame(await asyncio.wait_for(ws.recv(), 15))
            if welcome.get("type") != "welcome":
                raise ProtocolError(f"the home answered the hello with {welcome.get('type')!r}: {welcome.get('error')}")
            self.connected_at = time.monotonic()
            self.say(f"connected to {self.config.url} as {self.config.name} "
                     f"(capabilities: {', '.join(self.caps) or 'none'})")
            try:
                async for raw in ws:
                    frame = decode_frame(raw)
                    if frame["type"] == "call":
                        task = asyncio.create_task(self._answer(ws, frame))
                        self.tasks.add(task)
                        task.add_done_callback(self.tasks.discard)
            finally:
                for task in list(self.tasks):
                    task.cancel()

    async def _answer(self, ws: Any, frame: dict[str, Any]) -> None:
        call_id = str(frame.get("id", ""))
        name = str(frame.get("capability", ""))
        raw = frame.get("args")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        cap = self.caps.get(name)
        if cap is None:
            reply = result_frame(call_id, error=f"this node does not offer {name!r} (offered: {', '.join(self.caps)})")
        else:
            try:
                result = await asyncio.wait_for(cap.call(args), CALL_TIMEOUT)
                reply = result_frame(call_id, result)
            except CapabilityError as exc:
                reply = result_frame(call_id, error=str(exc))
            except TimeoutError:
                reply = result_frame(call_id, error=f"{name} took longer than {CALL_TIMEOUT:g}s on the node")
            except Exception as exc:
                log.exception("capability %s failed", name)
                reply = result_frame(call_id, error=f"{name} failed on the node: {type(exc).__name__}: {exc}")
        with contextlib.suppress(Exception):
            await ws.send(reply)


def _error_of(body: str) -> str:
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(body).get("error") or body)
    return body or "no reason given"

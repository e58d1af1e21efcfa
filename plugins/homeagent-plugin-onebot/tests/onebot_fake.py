"""A loopback OneBot v11 implementation, written from the public OneBot 11 spec.

It plays NapCat's part: a universal WebSocket **server** for forward mode (checking
``Authorization: Bearer`` / ``?access_token``: 401 when missing, 403 when wrong) or a
**client** for reverse mode (``X-Self-ID``, ``X-Client-Role: Universal``, the token header).
It pushes events (``lifecycle`` and ``heartbeat`` meta events, private and group message
events with segment arrays or CQ strings), answers API frames (``get_login_info``,
``send_private_msg``, ``send_group_msg``, ``upload_private_file``, ``upload_group_file``;
anything else ``retcode 1404``), serves media over HTTP on the same port (``/media/<name>``),
and can break a connection in the middle of a frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import struct
import time
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Response

SELF_ID = 10001
NICKNAME = "小管家"


class FakeOneBot:
    def __init__(self, *, access_token: str = "", self_id: int = SELF_ID) -> None:
        self.access_token = access_token
        self.self_id = self_id
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.calls: list[dict[str, Any]] = []
        self.media: dict[str, bytes] = {}
        self.connections = 0
        self.rejected: list[int] = []
        self.port = 0
        self._ws: Any = None
        self._connected = asyncio.Event()
        self._server: Any = None
        self._client: asyncio.Task[None] | None = None
        self._ids = itertools.count(1000)

    # ------------------------------------------------------------------ forward: we are the server

    async def start_server(self) -> FakeOneBot:
        from websockets.asyncio.server import serve

        self._server = await serve(self._handler, "127.0.0.1", 0, process_request=self._process_request)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/"

    def media_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/media/{name}"

    def _process_request(self, connection: Any, request: Any) -> Any:
        path = urlsplit(request.path)
        if path.path.startswith("/media/"):
            blob = self.media.get(path.path[len("/media/") :])
            if blob is None:
                return connection.respond(HTTPStatus.NOT_FOUND, "no such media\n")
            headers = Headers([("Content-Type", "application/octet-stream"), ("Content-Length", str(len(blob)))])
            return Response(200, "OK", headers, blob)
        if not self.access_token:
            return None
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else (parse_qs(path.query).get("access_token") or [""])[0]
        if not token:
            self.rejected.append(401)
            return connection.respond(HTTPStatus.UNAUTHORIZED, "missing token\n")
        if token != self.access_token:
            self.rejected.append(403)
            return connection.respond(HTTPStatus.FORBIDDEN, "wrong token\n")
        return None

    async def _handler(self, ws: Any) -> None:
        await self._attach(ws)

    # ------------------------------------------------------------------ reverse: we are the client

    async def connect_reverse(self, url: str, *, token: str | None = None, origin: str = "") -> None:
        """Connect to the plugin's reverse server (raises InvalidStatus when refused);
        ``origin`` makes the handshake look like a web page's."""
        from websockets.asyncio.client import connect

        headers = {"X-Self-ID": str(self.self_id), "X-Client-Role": "Universal"}
        if origin:
            headers["Origin"] = origin
        token = self.access_token if token is None else token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        ws = await connect(url, additional_headers=headers, proxy=None)
        self._client = asyncio.get_running_loop().create_task(self._attach(ws))

    # ------------------------------------------------------------------ both

    async def _attach(self, ws: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        self._ws = ws
        self.connections += 1
        self._connected.set()
        await self._send_event({"post_type": "meta_event", "meta_event_type": "lifecycle", "sub_type": "connect"})
        try:
            async for raw in ws:
                await self._api(json.loads(raw))
        except ConnectionClosed:
            pass
        finally:
            if self._ws is ws:
                self._ws = None
                self._connected.clear()

    async def wait_connected(self, connections: int = 1, timeout: float = 10) -> None:
        async with asyncio.timeout(timeout):
            while self.connections < connections or self._ws is None:
                await asyncio.sleep(0.02)

    async def _api(self, frame: dict[str, Any]) -> None:
        self.calls.append(frame)
        action, params, echo = frame.get("action"), frame.get("params") or {}, frame.get("echo")
        data: Any = None
        if action == "get_login_info":
            data = {"user_id": self.self_id, "nickname": NICKNAME}
        elif action in ("send_private_msg", "send_group_msg", "send_msg"):
            data = {"message_id": next(self._ids)}
            await self.sent.put({"action": action, **params, "message_id": data["message_id"]})
        elif action in ("upload_private_file", "upload_group_file"):
            await self.sent.put({"action": action, **params})
        else:
            await self._reply({"status": "failed", "retcode": 1404, "data": None, "wording": "unknown action",
                               "echo": echo})
            return
        await self._reply({"status": "ok", "retcode": 0, "data": data, "echo": echo})

    async def _reply(self, frame: dict[str, Any]) -> None:
        if self._ws is not None:
            await self._ws.send(json.dumps(frame, ensure_ascii=False))

    async def _send_event(self, event: dict[str, Any]) -> None:
        if self._ws is None:  # the plugin connects in the background after its start-up
            await self.wait_connected()
        assert self._ws is not None, "no connection"
        await self._ws.send(json.dumps({"time": int(time.time()), "self_id": self.self_id, **event},
                                       ensure_ascii=False))

    async def send_raw(self, raw: str) -> None:
        assert self._ws is not None
        await self._ws.send(raw)

    async def heartbeat(self) -> None:
        await self._send_event({"post_type": "meta_event", "meta_event_type": "heartbeat", "interval": 5000,
                                "status": {"online": True, "good": True}})

    async def private(self, user_id: int, nickname: str, message: Any) -> int:
        message_id = next(self._ids)
        await self._send_event({
            "post_type": "message", "message_type": "private", "sub_type": "friend", "message_id": message_id,
            "user_id": user_id, "message": message, "raw_message": message if isinstance(message, str) else "",
            "font": 0, "sender": {"user_id": user_id, "nickname": nickname, "sex": "unknown", "age": 0},
        })
        return message_id

    async def group(self, group_id: int, user_id: int, nickname: str, message: Any, card: str = "") -> int:
        message_id = next(self._ids)
        await self._send_event({
            "post_type": "message", "message_type": "group", "sub_type": "normal", "message_id": message_id,
            "group_id": group_id, "user_id": user_id, "anonymous": None, "message": message,
            "raw_message": message if isinstance(message, str) else "", "font": 0,
            "sender": {"user_id": user_id, "nickname": nickname, "card": card, "role": "member"},
        })
        return message_id

    async def break_mid_frame(self) -> None:
        """Send the first half of a text frame, then drop the TCP connection."""
        assert self._ws is not None
        payload = json.dumps({"post_type": "message", "message_type": "private", "user_id": 1,
                              "message": "this frame never ends"}).encode()
        header = struct.pack("!BB", 0x81, 126) + struct.pack("!H", len(payload))
        transport = self._ws.transport
        transport.write(header + payload[: len(payload) // 2])
        transport.abort()

    async def next_sent(self, timeout: float = 15) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            return await self.sent.get()

    async def close(self) -> None:
        if self._client is not None:
            self._client.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._client
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


def text_of(sent: dict[str, Any]) -> str:
    """The text of a sent message (segment array or CQ string)."""
    message = sent.get("message")
    if isinstance(message, str):
        return message
    return "".join(str(s.get("data", {}).get("text", "")) for s in message or () if s.get("type") == "text")


def png_bytes() -> bytes:
    """A real 1x1 PNG."""
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack("!I", len(data)) + kind + data + struct.pack("!I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack("!IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    raw = b"\x00\xff\x00\x00"
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")

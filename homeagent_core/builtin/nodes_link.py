"""The live links of connected nodes: the WebSocket each keeps open, its calls, and its tools.

:class:`NodeHub` accepts a node's WebSocket (``/api/v1/nodes/ws``, served by the web UI): the
device token in ``Authorization: Bearer`` names the node (an unknown or revoked token gets
**401**, a second connection of a connected node **409**), its ``hello`` lists capabilities, and
each becomes the tool ``node_<name>_<capability>`` for as long as the link lives. Calls time out;
a result's text is capped. A node that sends something that is not the protocol (not JSON, a
binary or oversized frame, a result nobody asked for, too many unknown messages) or floods is cut
off, and the reason is kept in the store (``nodes list`` shows it as ``problem``). Every
``keepalive_s`` the link re-reads its row: a token revoked by the CLI while the daemon was not
told closes the link then at the latest.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from homeagent_core.builtin.nodes_store import NodeStore
from homeagent_sdk.errors import ToolError
from homeagent_sdk.node import NodeImage, ProtocolError, call_frame, decode_frame, parse_hello, parse_result
from homeagent_sdk.types import ToolDef

if TYPE_CHECKING:
    from starlette.websockets import WebSocket

__all__ = ["CallFailed", "Link", "LinkLimits", "NodeHub"]

log = logging.getLogger("homeagent.nodes")

#: WebSocket close codes the hub uses (4000-4999 are the application's).
CLOSE_PROTOCOL = 4400
CLOSE_REVOKED = 4401
CLOSE_FLOOD = 4429
_STRIKES = 5


class CallFailed(ToolError):
    """A call to a node failed: offline, timed out, the link dropped, or the node said no."""


@dataclass
class LinkLimits:
    call_timeout: float = 60.0
    max_result_bytes: int = 64 * 1024
    max_frames_per_10s: int = 200
    keepalive_s: float = 15.0
    hello_timeout: float = 10.0
    #: A device token older than this (seconds since pairing) has expired; 0: tokens never expire.
    token_max_age_s: float = 0.0


@dataclass
class Link:
    """One connected node."""

    name: str
    ws: WebSocket
    capabilities: list[dict[str, Any]]
    platform: dict[str, Any]
    pending: dict[str, asyncio.Future[tuple[bool, str, list[NodeImage]]]] = field(default_factory=dict)
    frames: deque[float] = field(default_factory=deque)
    strikes: int = 0
    closed: bool = False
    tools: list[str] = field(default_factory=list)

    def capability(self, name: str) -> dict[str, Any] | None:
        return next((c for c in self.capabilities if c["name"] == name), None)


ToolFactory = Callable[[Link, dict[str, Any]], ToolDef]


class NodeHub:
    """Every connected node of one daemon."""

    def __init__(self, store: NodeStore, limits: LinkLimits, *, make_tool: ToolFactory,
                 add_tool: Callable[[ToolDef], object], remove_tool: Callable[[str], object],
                 publish: Callable[[str, dict[str, Any]], Any] | None = None) -> None:
        self.store = store
        self.limits = limits
        self.make_tool = make_tool
        self.add_tool = add_tool
        self.remove_tool = remove_tool
        self.publish = publish
        self.links: dict[str, Link] = {}
        self._reserved: set[str] = set()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Future[None]] = set()

    # ------------------------------------------------------------------ accepting

    async def serve(self, ws: WebSocket) -> None:
        """Run one node's WebSocket from the handshake to its end (never raises)."""
        from starlette.responses import JSONResponse
        from starlette.websockets import WebSocketDisconnect

        auth = ws.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        name, why = await asyncio.to_thread(
            functools.partial(self.store.authenticate, token, max_age_s=self.limits.token_max_age_s))
        if name is None:
            await ws.send_denial_response(JSONResponse({"error": why}, status_code=401))
            return
        if name in self.links or name in self._reserved:
            await ws.send_denial_response(JSONResponse(
                {"error": f"a node named {name!r} is already connected; a second connection is refused"},
                status_code=409))
            return
        self._reserved.add(name)
        link: Link | None = None
        try:
            await ws.accept()
            link = await self._hello(ws, name)
            if link is None:
                return
            await self._run(link)
        except (WebSocketDisconnect, OSError) as exc:
            log.info("node %s: the link dropped (%s)", name, exc)
        except Exception:
            log.exception("node %s: the link failed", name)
        finally:
            self._reserved.discard(name)
            if link is not None:
                await self._drop(link)

    async def _hello(self, ws: WebSocket, name: str) -> Link | None:
        try:
            message = await asyncio.wait_for(ws.receive(), self.limits.hello_timeout)
        except TimeoutError:
            await self._refuse(ws, name, f"sent no hello within {self.limits.hello_timeout:g}s")
            return None
        if message["type"] == "websocket.disconnect":
            return None
        try:
            raw = message.get("text")
            payload = raw if isinstance(raw, str) else bytes(message.get("bytes") or b"")
            frame = await asyncio.to_thread(decode_frame, payload) if len(payload) > _PARSE_INLINE else decode_frame(
                payload)
            caps, platform = parse_hello(frame)
            if frame.get("node") not in (None, name):
                raise ProtocolError(f"the hello names node {frame.get('node')!r}, but the token is {name!r}'s")
        except ProtocolError as exc:
            await self._refuse(ws, name, f"bad hello: {exc}")
            return None
        link = Link(name, ws, caps, platform)
        self.links[name] = link
        for cap in caps:
            tool = self.make_tool(link, cap)
            try:
                self.add_tool(tool)
                link.tools.append(tool.name)
            except Exception as exc:
                log.warning("node %s: tool %s not registered: %s", name, tool.name, exc)
        await asyncio.to_thread(self.store.set_online, name, [c["name"] for c in caps], platform)
        await ws.send_json({"type": "welcome", "node": name, "max_result_bytes": self.limits.max_result_bytes})
        log.info("node %s connected (%s)", name, ", ".join(c["name"] for c in caps) or "no capabilities")
        self._publish("node_connected", {"node": name, "capabilities": [c["name"] for c in caps]})
        return link

    async def _refuse(self, ws: WebSocket, name: str, problem: str) -> None:
        log.warning("node %s cut off: %s", name, problem)
        await asyncio.to_thread(self.store.mark_problem, name, problem)
        with contextlib.suppress(Exception):
            await ws.send_json({"type": "error", "error": problem})
            await ws.close(CLOSE_PROTOCOL, problem[:120])

    # ------------------------------------------------------------------ the live link

    async def _run(self, link: Link) -> None:
        keepalive = asyncio.create_task(self._keepalive(link))
        try:
            while not link.closed:
                message = await link.ws.receive()
                if message["type"] == "websocket.disconnect":
                    code = message.get("code")
                    if code == 1009:
                        await self._cut(link, "sent a frame larger than the daemon accepts", close=False)
                    return
                text = message.get("text")
                payload = text if isinstance(text, str) else bytes(message.get("bytes") or b"")
                # A big frame (an image's base64) is parsed in a thread: the loop never waits on it.
                parsed = await asyncio.to_thread(_parse, payload) if len(payload) > _PARSE_INLINE else _parse(payload)
                problem = self._frame(link, isinstance(text, str), parsed)
                if problem:
                    await self._cut(link, problem, code=CLOSE_FLOOD if problem.startswith("flood") else CLOSE_PROTOCOL)
                    return
        finally:
            keepalive.cancel()

    def _frame(self, link: Link, is_text: bool, parsed: _Parsed | ProtocolError) -> str:
        """Handle one received frame; the reason to cut the node off, or "".

        Answers to calls the daemon made are never a flood; every other frame counts.
        """
        try:
            if isinstance(parsed, ProtocolError):
                raise parsed
            frame, result = parsed
            if result is not None:
                call_id, ok, body, images = result
                future = link.pending.pop(call_id, None)
                if future is None:
                    raise ProtocolError(f"a result for call {call_id!r}, which was never asked or already ended")
                if not future.done():
                    future.set_result((ok, body, images))
                return ""
            now = time.monotonic()
            link.frames.append(now)
            while link.frames and link.frames[0] < now - 10:
                link.frames.popleft()
            if len(link.frames) > self.limits.max_frames_per_10s:
                return f"flood: more than {self.limits.max_frames_per_10s} unasked frames in 10 s"
            if frame["type"] == "pong":
                return ""
            raise ProtocolError(f"unknown message type {frame['type']!r} (a node sends hello, result or pong)")
        except ProtocolError as exc:
            if not is_text or exc.args[0].startswith("a frame is not JSON"):
                return f"garbage: {exc}"
            link.strikes += 1
            if link.strikes >= _STRIKES:
                return f"garbage: {_STRIKES} bad messages, the last: {exc}"
            task = asyncio.ensure_future(self._send(link, {"type": "error", "error": str(exc)}))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return ""

    async def _send(self, link: Link, frame: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):
            await link.ws.send_json(frame)

    async def _keepalive(self, link: Link) -> None:
        while not link.closed:
            await asyncio.sleep(self.limits.keepalive_s)
            alive = functools.partial(self.store.seen, link.name, max_age_s=self.limits.token_max_age_s)
            if not await asyncio.to_thread(alive):
                await self.close(link.name, "the node was revoked or its token expired", code=CLOSE_REVOKED)
                return

    async def _cut(self, link: Link, problem: str, *, code: int = CLOSE_PROTOCOL, close: bool = True) -> None:
        log.warning("node %s cut off: %s", link.name, problem)
        await asyncio.to_thread(self.store.mark_problem, link.name, problem)
        self._publish("node_cut_off", {"node": link.name, "problem": problem})
        if close:
            await self.close(link.name, problem, code=code)

    async def close(self, name: str, reason: str, *, code: int = 1000) -> bool:
        """Close node ``name``'s link (its tools go at once); False when it is not connected."""
        link = self.links.get(name)
        if link is None:
            return False
        self._unregister(link)
        with contextlib.suppress(Exception):
            await link.ws.close(code, reason[:120])
        return True

    def _unregister(self, link: Link) -> None:
        if link.closed:
            return
        link.closed = True
        for tool in link.tools:
            self.remove_tool(tool)
        link.tools.clear()
        for future in link.pending.values():
            if not future.done():
                future.set_exception(CallFailed(f"node {link.name} disconnected before it answered"))
        link.pending.clear()
        if self.links.get(link.name) is link:
            del self.links[link.name]

    async def _drop(self, link: Link) -> None:
        self._unregister(link)
        with contextlib.suppress(sqlite3.ProgrammingError):  # the store closed first (the daemon is stopping)
            await asyncio.to_thread(self.store.set_offline, link.name)
        log.info("node %s disconnected", link.name)
        self._publish("node_disconnected", {"node": link.name})

    async def close_all(self) -> None:
        for name in list(self.links):
            await self.close(name, "the home daemon is stopping", code=1001)

    def _publish(self, event: str, data: dict[str, Any]) -> None:
        if self.publish is not None:
            with contextlib.suppress(Exception):
                self.publish(event, data)

    # ------------------------------------------------------------------ calls

    async def call(self, name: str, capability: str, args: dict[str, Any],
                   timeout: float | None = None) -> tuple[str, list[NodeImage]]:
        """Run ``capability`` on node ``name``: its text (capped) and images.

        Raises:
            CallFailed: the node is offline, does not offer it, timed out, dropped, or answered a failure.
        """
        link = self.links.get(name)
        if link is None or link.closed:
            raise CallFailed(f"node {name!r} is offline; its tools come back when it reconnects")
        if link.capability(capability) is None:
            offered = ", ".join(c["name"] for c in link.capabilities) or "nothing"
            raise CallFailed(f"node {name!r} does not offer {capability!r} (it offers {offered})")
        call_id = f"c{next(self._ids)}"
        future: asyncio.Future[tuple[bool, str, list[NodeImage]]] = asyncio.get_running_loop().create_future()
        link.pending[call_id] = future
        wait = self.limits.call_timeout if timeout is None else timeout
        try:
            await link.ws.send_text(call_frame(call_id, capability, args))
            ok, text, images = await asyncio.wait_for(future, wait)
        except TimeoutError:
            raise CallFailed(f"node {name!r} did not answer {capability} within {wait:g}s") from None
        except (RuntimeError, OSError) as exc:
            raise CallFailed(f"node {name!r}: the link dropped ({exc})") from None
        finally:
            link.pending.pop(call_id, None)
        if not ok:
            raise CallFailed(f"node {name!r} refused {capability}: {text}")
        return _cap(text, self.limits.max_result_bytes), images

    def listing(self) -> dict[str, dict[str, Any]]:
        """The connected nodes: name → capabilities and platform."""
        return {n: {"capabilities": [c["name"] for c in link.capabilities], "platform": link.platform}
                for n, link in self.links.items()}


_Parsed = tuple[dict[str, Any], tuple[str, bool, str, list[NodeImage]] | None]
#: Frames up to this many characters are parsed on the loop; bigger ones in a thread.
_PARSE_INLINE = 64 * 1024


def _parse(payload: str | bytes) -> _Parsed | ProtocolError:
    """A frame decoded, and a result's fields parsed (images base64-decoded); the ProtocolError if it is not one."""
    try:
        frame = decode_frame(payload)
        return frame, parse_result(frame) if frame["type"] == "result" else None
    except ProtocolError as exc:
        return exc


def _cap(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit].decode(errors="ignore") + f"\n[truncated: {len(data) - limit} more bytes]"


"""Server-sent events for the web UI: a replay ring and one bounded queue per client.

Aggregate events (``agent_output``, ``tool_call``, ``raw_input``, ``stage``, ...) are kept in
a 200-entry ring so a reconnecting client (``Last-Event-ID``) gets what it missed; token
deltas are forwarded live and never stored. A client whose queue overflows gets
``sync_required`` and is dropped: it refetches history instead of silently missing events.
A client going away never affects the publisher. Heartbeats (``: heartbeat``) are written
every ``heartbeat_s`` seconds of silence, straight from the client's own stream.

A client may subscribe with an ``accept`` predicate: it then gets (live and replayed) only the
frames it accepts. A frame of a turn names the turn's ``person`` and ``thread``; other frames
have ``thread`` None.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import orjson

from homeagent_sdk.types import Event

__all__ = ["AGGREGATE", "APPROVALS", "DELTAS", "EventHub", "SSEFrame", "Subscription"]

AGGREGATE = frozenset(
    {"agent_output", "agent_error", "tool_call", "stage", "agent_llm_chain", "terminal_output",
     "raw_input", "system"}
)
DELTAS = frozenset({"content_delta", "reasoning_delta"})
#: "Ask the owner" requests and their outcomes: the owner's page shows Approve / Deny. They name
#: the asker and the call's arguments, so they are for the owner's streams only.
APPROVALS = frozenset({"approval_requested", "approval_decided"})
#: Most frames written together when a client's queue holds a burst.
BATCH = 128


@dataclass(frozen=True)
class SSEFrame:
    id: str
    event: str
    data: bytes
    #: The thread of the turn that published it (None: no turn's event) and who spoke in that turn.
    thread: str | None = None
    person: str = ""

    @functools.cached_property
    def encoded(self) -> bytes:
        """The wire form, built once however many clients receive the frame."""
        head = f"id: {self.id}\n" if self.id else ""
        return f"{head}event: {self.event}\n".encode() + b"data: " + self.data + b"\n\n"

    def encode(self) -> bytes:
        return self.encoded


@dataclass(eq=False)
class _Client:
    queue: asyncio.Queue[SSEFrame | None] = field(default_factory=lambda: asyncio.Queue(maxsize=2048))
    lagging: bool = False
    accept: Callable[[SSEFrame], bool] | None = None


class EventHub:
    """Fans bus events out to SSE clients."""

    def __init__(self, *, replay: int = 200, heartbeat_s: float = 15.0, queue_size: int = 2048) -> None:
        self._ring: deque[SSEFrame] = deque(maxlen=replay)
        self._clients: set[_Client] = set()
        self._seq = itertools.count(1)
        self.heartbeat_s = heartbeat_s
        self.queue_size = queue_size

    def handle(self, event: Event) -> None:
        """Bus subscriber: turn an event into a frame and hand it to every client."""
        if event.name not in AGGREGATE and event.name not in DELTAS and event.name not in APPROVALS:
            return
        if event.data.get("channel") == "_consolidation_":
            return
        payload = {"type": event.name, "source": event.source, "payload": event.data, "timestamp": event.timestamp}
        data = orjson.dumps(payload, default=str)
        raw_thread = event.data.get("thread")
        thread = raw_thread if isinstance(raw_thread, str) else None
        person = str(event.data.get("person") or "")
        if event.name in DELTAS:
            frame = SSEFrame("", event.name, data, thread, person)
        else:
            frame = SSEFrame(f"{int(event.timestamp)}-{next(self._seq)}", event.name, data, thread, person)
            self._ring.append(frame)
        for client in list(self._clients):
            self._offer(client, frame)

    def _offer(self, client: _Client, frame: SSEFrame) -> None:
        if client.lagging or (client.accept is not None and not client.accept(frame)):
            return
        try:
            client.queue.put_nowait(frame)
        except asyncio.QueueFull:
            # Too slow: drop what it has not read, tell it to resync, end its stream. It is
            # forgotten right away, so a stream that never started cannot pile up either.
            client.lagging = True
            self._clients.discard(client)
            while not client.queue.empty():
                client.queue.get_nowait()
            client.queue.put_nowait(SSEFrame("", "sync_required", b"{}"))
            client.queue.put_nowait(None)

    def replay_after(self, last_id: str | None) -> list[SSEFrame] | None:
        """Frames after ``last_id``; ``None`` when the id is unknown (client must resync)."""
        if not last_id:
            return list(self._ring)
        frames = list(self._ring)
        for index, frame in enumerate(frames):
            if frame.id == last_id:
                return frames[index + 1 :]
        return None

    @property
    def last_id(self) -> str:
        """The id of the newest replayable event (``""`` before the first)."""
        return self._ring[-1].id if self._ring else ""

    @property
    def client_count(self) -> int:
        return len(self._clients)

    def subscribe(
        self, last_id: str | None = None, *, replay: bool = True, accept: Callable[[SSEFrame], bool] | None = None
    ) -> Subscription:
        """Register a client now and take its replay snapshot in the same step.

        Call it before the response starts (and before anything is injected): every event
        published from here on reaches the client, and none is both replayed and queued.
        """
        client = _Client(queue=asyncio.Queue(maxsize=max(2, self.queue_size)), accept=accept)  # room for resync
        self._clients.add(client)
        frames = self.replay_after(last_id) if replay else []
        if frames and accept is not None:
            frames = [f for f in frames if accept(f)]
        return Subscription(self, client, frames)

    def stream(
        self, last_id: str | None = None, *, replay: bool = True, accept: Callable[[SSEFrame], bool] | None = None
    ) -> AsyncIterator[bytes]:
        """The byte stream of one SSE client (subscribed on this call, not on first read)."""
        return self.subscribe(last_id, replay=replay, accept=accept).frames()

    def _drop(self, client: _Client) -> None:
        self._clients.discard(client)


class Subscription:
    """One SSE client: its replay snapshot and live queue; :meth:`frames` is its byte stream."""

    def __init__(self, hub: EventHub, client: _Client, replay: list[SSEFrame] | None) -> None:
        self.hub, self.client, self.replay = hub, client, replay

    def close(self) -> None:
        self.hub._drop(self.client)

    async def frames(self) -> AsyncIterator[bytes]:
        """``retry``, the replay (or ``sync_required``), then live frames and heartbeats."""
        try:
            yield b"retry: 2000\n\n"
            if self.replay is None:
                yield SSEFrame("", "sync_required", b"{}").encode()
            else:
                for replayed in self.replay:
                    yield replayed.encoded
                self.replay = []
            heartbeat = self.hub.heartbeat_s
            next_beat = time.monotonic() + heartbeat
            queue = self.client.queue
            while True:
                try:
                    async with asyncio.timeout(max(0.0, next_beat - time.monotonic())):
                        frame = await queue.get()
                except TimeoutError:
                    yield b": heartbeat\n\n"
                    next_beat = time.monotonic() + heartbeat
                    continue
                if frame is None:
                    return
                # A burst goes out in one write: whatever else is queued already, up to a batch.
                batch = [frame.encoded]
                while len(batch) < BATCH and not queue.empty():
                    more = queue.get_nowait()
                    if more is None:
                        yield b"".join(batch)
                        return
                    batch.append(more.encoded)
                yield b"".join(batch)
        finally:
            self.close()

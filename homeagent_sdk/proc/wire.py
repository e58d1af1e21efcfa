"""NDJSON framing and the request/response peer shared by both ends of the proc protocol.

One frame is one JSON object on one line. A frame with a non-empty ``method`` is a request
(``{"id", "method", "params"}``; ``id`` 0 or absent = notification, never answered); any other
frame is a response (``{"id", "result"}`` or ``{"id", "error": "<text>"}``). Each side numbers
its own requests from 1 and keeps a table of pending calls. An ``id`` is an integer and a
``method`` a string: a frame with any other type there is a bad frame, like one that is not a
JSON object, and the frames read with it are handled as usual.

:class:`Peer` is transport-free: the owner feeds it bytes (:meth:`Peer.feed`) and gives it a
``write`` callable. Incoming requests are run by a small pool of worker tasks, so a handler
may call back into the other side while the read loop keeps going: a request never waits
behind a handler that is waiting (whenever requests are queued and no worker is free to take
them, one is woken or started), and a worker that finds more requests queued when its handler
returns takes the next one at once, so a burst costs one task switch, not one task per frame.
A handler runs inside its worker's task (``asyncio.current_task()``, ``asyncio.timeout`` and
cancellation work as usual); context variables it sets stay with that worker. Frames over ``max_frame`` bytes are
refused in both directions with an explicit error instead of a hang: an outgoing one raises
:class:`FrameTooLarge` at the caller, an incoming one is skipped and answered (or its pending
call failed) using the ``id`` read from the frame's first bytes.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import dataclasses
import enum
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = [
    "DEFAULT_MAX_FRAME",
    "PROTOCOL_VERSION",
    "FrameBatcher",
    "FrameTooLarge",
    "Peer",
    "PeerClosed",
    "RemoteError",
    "dumps",
    "loads",
]

log = logging.getLogger("homeagent.proc")

#: Version of the wire protocol spoken by this implementation (inline JSON, one round trip
#: per stage). Both sides refuse a handshake with any other number.
PROTOCOL_VERSION = 3

#: Default cap of one frame, both directions.
DEFAULT_MAX_FRAME = 16 * 1024 * 1024

#: Idle request workers a peer keeps after a burst; the rest end.
_IDLE_WORKERS = 8

Handler = Callable[[Any], Awaitable[Any]]

_orjson: Any
try:  # orjson is a dependency of the distribution; stdlib json keeps the SDK importable without it
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is missing
    _orjson = None


def _default(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot send a {type(value).__name__} over the plugin protocol; use JSON values")


def _json_dumps(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_default) + "\n").encode("utf-8")


if _orjson is not None:
    _OPTS = _orjson.OPT_APPEND_NEWLINE | _orjson.OPT_NON_STR_KEYS

    def dumps(obj: Any) -> bytes:
        """One frame: compact JSON plus the terminating newline."""
        try:
            frame: bytes = _orjson.dumps(obj, default=_default, option=_OPTS)
            return frame
        except TypeError:
            # Integers beyond 64 bits and other corner cases orjson refuses.
            return _json_dumps(obj)

    loads = _orjson.loads
else:  # pragma: no cover
    dumps = _json_dumps
    loads = json.loads


class RemoteError(Exception):
    """The other side answered a call with an error; the message is its text."""


class PeerClosed(Exception):
    """The connection ended (process exited, pipe closed) while a call was pending."""


class FrameTooLarge(Exception):
    """A frame exceeded the frame cap; the message gives both sizes and the setting to raise."""


class FrameBatcher:
    """Writes frames to a transport, coalescing those sent within one loop iteration.

    The first frame of an iteration goes out at once (no added latency for a lone call).
    Frames written after it in the same iteration (32 calls in flight, a burst of answers)
    are joined into writes of at most :attr:`max_frames` frames: a full group goes out as
    soon as it is complete, the rest when the loop comes round. Order is kept.

    Why groups and not one write per iteration: the reader starts on the first frames of a
    burst while the writer still produces the others. With one write per iteration each side
    sat idle while the other worked, and on two cores 32 calls in flight ran at half the rate
    (``bench/bench_proc.py``); one write per frame instead costs a system call and a wake-up
    of the reader per frame, which a single core pays for.
    """

    #: Most frames joined into one write.
    max_frames = 8

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self.transport = transport
        self._queue: list[bytes] = []
        self._armed = False
        self._loop = asyncio.get_running_loop()

    @property
    def pending(self) -> int:
        """Bytes accepted but not yet handed to the transport."""
        return sum(map(len, self._queue))

    def write(self, data: bytes) -> None:
        if not self._armed:
            self.transport.write(data)
            self._armed = True
            self._loop.call_soon(self._flush)
            return
        queue = self._queue
        queue.append(data)
        if len(queue) >= self.max_frames:
            self._queue = []
            self._send(queue)

    def _flush(self) -> None:
        self._armed = False
        queue = self._queue
        if queue:
            self._queue = []
            self._send(queue)

    def _send(self, frames: list[bytes]) -> None:
        if not self.transport.is_closing():
            self.transport.write(frames[0] if len(frames) == 1 else b"".join(frames))


_ID_RE = re.compile(rb'"id"\s*:\s*(\d+)')
_METHOD_RE = re.compile(rb'"method"\s*:\s*"([^"]{1,128})"')


class Peer:
    """One end of an NDJSON request/response connection.

    :param write: sends bytes to the other side (called on the loop thread only).
    :param handlers: method name -> ``async def handler(params) -> result``.
    :param max_frame: largest frame in bytes, both directions.
    :param unknown_method: error text prefix for methods without a handler.
    :param on_bad_frame: called with the offending line when a frame is not a JSON object, or
        its ``id`` is not an integer or its ``method`` not a string; the default logs it and
        skips the line.
    :param label: used in log lines and error messages.
    """

    def __init__(
        self,
        write: Callable[[bytes], None],
        handlers: dict[str, Handler] | None = None,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        unknown_method: str = "unknown method",
        on_bad_frame: Callable[[bytes], None] | None = None,
        label: str = "peer",
    ) -> None:
        self._write = write
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self.max_frame = max_frame
        self.unknown_method = unknown_method
        self.on_bad_frame = on_bad_frame
        self.label = label
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Requests waiting for a worker: (id, method, handler, params).
        self._queue: collections.deque[tuple[int, str, Handler, Any]] = collections.deque()
        #: Wake-up futures of idle workers, most recently idle last.
        self._idle: list[asyncio.Future[None]] = []
        #: Workers woken or started that have not yet looked at the queue.
        self._ready = 0
        self._buf = bytearray()
        self._scan = 0
        self._skipping: bytes | None = None
        self.closed: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ outgoing

    def _send(self, frame: bytes, method: str, *, answer: bool = False) -> None:
        if len(frame) - 1 > self.max_frame:
            what = f"answer to {method}" if answer else method
            raise FrameTooLarge(
                f"{what}: frame of {len(frame) - 1} bytes exceeds the {self.max_frame}-byte frame cap "
                "(send less data per call, or raise the cap on both sides)"
            )
        self._write(frame)

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result.

        Raises:
            RemoteError: the other side answered with an error.
            PeerClosed: the connection ended first.
            FrameTooLarge: the request (or its answer) exceeded the frame cap.
            TimeoutError: no answer within ``timeout`` seconds.
        """
        if self.closed is not None:
            raise PeerClosed(str(self.closed))
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        self._next_id += 1
        call_id = self._next_id
        future: asyncio.Future[Any] = loop.create_future()
        frame = dumps({"id": call_id, "method": method, "params": params})
        self._send(frame, method)
        self._pending[call_id] = future
        try:
            if timeout is None:
                return await future
            async with asyncio.timeout(timeout):
                return await future
        finally:
            self._pending.pop(call_id, None)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer)."""
        if self.closed is None:
            self._send(dumps({"id": 0, "method": method, "params": params}), method)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def close(self, reason: BaseException) -> None:
        """Fail every pending call with ``reason`` and refuse new ones."""
        if self.closed is not None:
            return
        self.closed = reason
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(PeerClosed(str(reason)) if not isinstance(reason, PeerClosed) else reason)
        for task in list(self._tasks):
            task.cancel()

    # ------------------------------------------------------------------ incoming

    def feed(self, data: bytes) -> None:
        """Hand received bytes to the peer; complete lines are dispatched at once.

        Once the peer is closed, further bytes are ignored: a frame that follows garbage must
        not complete a call that already failed with the crash.
        """
        if self.closed is not None:
            return
        if self._skipping is not None:
            nl = data.find(b"\n")
            if nl < 0:
                return
            self._oversized_done()
            data = data[nl + 1 :]
        buf = self._buf
        if not buf:
            # Fast path: the common case is whole frames arriving in one read.
            start = 0
            while True:
                nl = data.find(b"\n", start)
                if nl < 0:
                    break
                if nl > start:
                    self._frame(data[start:nl])
                    if self.closed is not None:
                        return
                start = nl + 1
            if start < len(data):
                buf += data[start:] if start else data
                self._scan = len(buf)
                self._check_size()
            return
        buf += data
        start = 0
        while True:
            nl = buf.find(b"\n", self._scan)
            if nl < 0:
                break
            if nl > start:
                self._frame(bytes(buf[start:nl]))
                if self.closed is not None:
                    return
            start = nl + 1
            self._scan = start
        if start:
            del buf[:start]
        self._scan = len(buf)
        self._check_size()

    def _check_size(self) -> None:
        if len(self._buf) > self.max_frame:
            self._skipping = bytes(self._buf[:256])
            self._buf.clear()
            self._scan = 0

    def _oversized_done(self) -> None:
        prefix, self._skipping = self._skipping or b"", None
        id_match = _ID_RE.search(prefix)
        method_match = _METHOD_RE.search(prefix)
        call_id = int(id_match.group(1)) if id_match else 0
        text = (
            f"frame exceeds the {self.max_frame}-byte frame cap of {self.label} "
            "(send less data per call, or raise the cap on both sides)"
        )
        log.error("%s: dropped an oversized %s", self.label, "request" if method_match else "frame")
        if method_match:
            if call_id:
                self._reply_error(call_id, f"{method_match.group(1).decode(errors='replace')}: {text}")
            return
        future = self._pending.pop(call_id, None)
        if future is not None and not future.done():
            future.set_exception(FrameTooLarge(f"the answer to call {call_id}: {text}"))

    def _frame(self, line: bytes) -> None:
        if len(line) > self.max_frame:
            self._skipping = bytes(line[:256])
            self._oversized_done()
            return
        try:
            msg = loads(line)
        except ValueError:
            msg = None
        if type(msg) is not dict:
            self._bad(line)
            return
        call_id = msg.get("id")
        if call_id is None:
            call_id = 0
        method = msg.get("method")
        if type(call_id) is not int or not (method is None or type(method) is str):
            self._bad(line)  # a list id would not even look up: the frames after it must still run
            return
        if method:
            handler = self.handlers.get(method)
            if handler is None:
                if call_id:
                    self._reply_error(call_id, f"{self.unknown_method}: {method}")
                else:
                    log.warning("%s: notification for unknown method %s dropped", self.label, method)
                return
            self._queue.append((call_id, method, handler, msg.get("params")))
            if not self._ready:
                self._add_worker()
            return
        future = self._pending.pop(call_id, None)
        if future is None:
            log.debug("%s: answer to unknown or expired call %r dropped", self.label, call_id)
            return
        if future.done():
            return
        error = msg.get("error")
        if error:
            future.set_exception(RemoteError(str(error)))
        else:
            future.set_result(msg.get("result"))

    def _bad(self, line: bytes) -> None:
        if self.on_bad_frame is not None:
            self.on_bad_frame(line)
        else:
            log.warning("%s: skipped a frame that is not a protocol frame: %r", self.label, line[:200])

    def _add_worker(self) -> None:
        """Wake an idle worker, or start one, to take the queued requests."""
        self._ready += 1
        while self._idle:
            waiter = self._idle.pop()
            if not waiter.done():
                waiter.set_result(None)
                return
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        task = loop.create_task(self._worker())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _worker(self) -> None:
        """Run queued requests one after another; wait idle (or end) when there are none."""
        queue = self._queue
        loop = self._loop or asyncio.get_running_loop()
        self._ready -= 1
        while self.closed is None:
            if not queue:
                if len(self._idle) >= _IDLE_WORKERS:
                    return
                waiter = loop.create_future()
                self._idle.append(waiter)
                await waiter
                self._ready -= 1
                continue
            call_id, method, handler, params = queue.popleft()
            if queue and not self._ready:
                self._add_worker()  # the rest must not wait behind this handler if it waits
            await self._handle(call_id, method, handler, params)

    async def _handle(self, call_id: int, method: str, handler: Handler, params: Any) -> None:
        try:
            result = await handler(params)
        except asyncio.CancelledError:
            if call_id and self.closed is None:
                self._reply_error(call_id, f"{method}: cancelled")
            raise
        except Exception as exc:
            if call_id:
                self._reply_error(call_id, _error_text(exc))
            else:
                log.warning("%s: notification %s failed: %s", self.label, method, exc)
            return
        if not call_id or self.closed is not None:
            return
        frame = dumps({"id": call_id, "result": result})
        try:
            self._send(frame, method, answer=True)
        except FrameTooLarge as exc:
            self._reply_error(call_id, str(exc))
        except Exception as exc:  # the pipe went away while answering
            log.debug("%s: could not answer %s: %s", self.label, method, exc)

    def _reply_error(self, call_id: int, text: str) -> None:
        if self.closed is not None:
            return
        try:
            self._write(dumps({"id": call_id, "error": text or "error"}))
        except Exception as exc:
            log.debug("%s: could not send an error answer: %s", self.label, exc)


def _error_text(exc: BaseException) -> str:
    """Deliberate refusals travel as their message; anything else keeps its type name."""
    from homeagent_sdk.errors import HomeAgentError

    text = str(exc)
    deliberate = (RemoteError, PeerClosed, FrameTooLarge, PermissionError, ValueError, LookupError, HomeAgentError)
    if text and isinstance(exc, deliberate) and not isinstance(exc, KeyError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

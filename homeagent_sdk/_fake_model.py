"""FakeModel: a scripted chat model for tests that speaks the unified provider shapes.

It implements the ``ChatProvider`` protocol (``chat`` and ``chat_stream``) without any
network: each call consumes the next scripted reply (or asks a ``responder`` callable),
records the request it was sent, and answers with a unified response or a stream of unified
chunks (content split into pieces, tool-call fragments keyed by ``stream_index``, a final
``done`` chunk with usage). Replies may carry a delay or hang until cancelled, so interrupt
and cancellation paths can be tested without fixed sleeps in the tests themselves.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from homeagent_sdk.errors import ProviderError

__all__ = ["FakeModel", "FakeReply", "ToolCallReply"]

_ids = itertools.count(1)


@dataclass
class FakeReply:
    """One scripted model reply.

    ``tool_calls`` holds ``(name, arguments)`` pairs or unified tool-call dicts. ``delay``
    waits before answering (the wait is cancellable), ``hang`` waits until the call is
    cancelled, ``error`` is raised instead of answering. ``reset_after`` (stream only)
    emits that many characters, then a ``reset`` chunk, then the full text again.
    """

    content: str = ""
    tool_calls: list[Any] = field(default_factory=list)
    reasoning: str = ""
    delay: float = 0.0
    hang: bool = False
    error: BaseException | None = None
    usage: dict[str, Any] | None = None
    finish_reason: str = ""
    reset_after: int = 0


def ToolCallReply(
    name: str | None = None,
    arguments: dict[str, Any] | None = None,
    *,
    calls: Iterable[tuple[str, dict[str, Any]]] = (),
    text: str = "",
    reasoning: str = "",
    delay: float = 0.0,
) -> FakeReply:
    """A reply that asks for one tool call (``name``, ``arguments``) or several (``calls``)."""
    pairs = list(calls)
    if name is not None:
        pairs.insert(0, (name, dict(arguments or {})))
    if not pairs:
        raise ValueError("ToolCallReply needs a tool name or calls=[(name, arguments), ...]")
    return FakeReply(content=text, tool_calls=pairs, reasoning=reasoning, delay=delay)


Responder = Callable[[dict[str, Any]], Any]


class FakeModel:
    """Scripted ``ChatProvider`` for tests; never touches the network.

    :param script: replies used in order: a ``str`` (plain text), a :class:`FakeReply`
        (see :func:`ToolCallReply`), or an exception instance (raised by that call).
    :param responder: alternatively a callable ``responder(request) -> reply`` (may be
        ``async``), asked on every call; it sees the whole unified request.
    :param default: reply used once the script is exhausted; without it an exhausted
        script raises :class:`ProviderError` naming how many replies were used.
    :param chunk_size: characters per streamed content chunk.

    ``requests`` records every request (messages list copied, so later appends by the caller
    do not show up); ``cancelled`` counts calls that were cancelled while in flight.
    """

    __test__ = False

    def __init__(
        self,
        script: Iterable[Any] = (),
        *,
        responder: Responder | None = None,
        default: Any = None,
        chunk_size: int = 8,
        name: str = "fake",
    ) -> None:
        self.name = name
        self._script = list(script)
        self._responder = responder
        self._default = default
        self.chunk_size = max(1, int(chunk_size))
        self.requests: list[dict[str, Any]] = []
        self.cancelled = 0
        self.completed = 0
        self._used = 0
        self._started = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    # ------------------------------------------------------------------ scripting

    def add(self, *replies: Any) -> None:
        """Append replies to the script."""
        self._script.extend(replies)

    @property
    def calls(self) -> int:
        """How many calls started so far."""
        return self._started

    async def wait_started(self, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until at least ``count`` calls have started (bounded by ``timeout``)."""
        if self._started >= count:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((count, fut))
        async with asyncio.timeout(timeout):
            await fut

    def _record(self, request: dict[str, Any]) -> None:
        snapshot = dict(request)
        if isinstance(snapshot.get("messages"), list):
            snapshot["messages"] = list(snapshot["messages"])
        self.requests.append(snapshot)
        self._started += 1
        still: list[tuple[int, asyncio.Future[None]]] = []
        for count, fut in self._waiters:
            if self._started >= count:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((count, fut))
        self._waiters = still

    async def _next_reply(self, request: dict[str, Any]) -> FakeReply:
        if self._responder is not None:
            reply = self._responder(request)
            if inspect.isawaitable(reply):
                reply = await reply
        elif self._used < len(self._script):
            reply = self._script[self._used]
            self._used += 1
        elif self._default is not None:
            reply = self._default
        else:
            raise ProviderError(
                f"FakeModel script exhausted after {self._used} replies; add more replies or pass default=..."
            )
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, str):
            return FakeReply(content=reply)
        if isinstance(reply, FakeReply):
            return reply
        raise TypeError(f"FakeModel reply must be str, FakeReply or an exception, got {type(reply).__name__}")

    async def _wait(self, reply: FakeReply) -> None:
        if reply.hang:
            await asyncio.get_running_loop().create_future()
        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        if reply.error is not None:
            raise reply.error

    @staticmethod
    def _usage(request: dict[str, Any], reply: FakeReply) -> dict[str, Any]:
        if reply.usage is not None:
            return dict(reply.usage)
        prompt = sum(len(str(m.get("content") or "")) for m in request.get("messages") or ())
        completion = len(reply.content) + sum(len(json.dumps(c, ensure_ascii=False)) for c in reply.tool_calls)
        return {"prompt": prompt // 4, "completion": completion // 4, "total": (prompt + completion) // 4}

    @staticmethod
    def _calls(reply: FakeReply) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for item in reply.tool_calls:
            if isinstance(item, dict):
                call = {"id": item.get("id") or f"call_{next(_ids)}", "type": "function", **item}
                call.setdefault("arguments", {})
            else:
                name, arguments = item
                call = {"id": f"call_{next(_ids)}", "type": "function", "name": name, "arguments": dict(arguments)}
            out.append(call)
        return out

    # ------------------------------------------------------------------ ChatProvider

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer with one unified response."""
        self._record(request)
        try:
            reply = await self._next_reply(request)
            await self._wait(reply)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        calls = self._calls(reply)
        self.completed += 1
        return {
            "content": reply.content,
            "reasoning_content": reply.reasoning,
            "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop"),
            "token_usage": self._usage(request, reply),
            "tool_calls": calls,
        }

    def chat_stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Answer with unified stream chunks."""
        return self._stream(request)

    async def _stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        self._record(request)
        try:
            reply = await self._next_reply(request)
            await self._wait(reply)
            size = self.chunk_size
            for i in range(0, len(reply.reasoning), size):
                yield {"content": "", "reasoning_content": reply.reasoning[i : i + size], "done": False}
            text = reply.content
            if reply.reset_after > 0:
                yield {"content": text[: reply.reset_after], "done": False}
                yield {"content": "", "reset": True, "done": False}
            for i in range(0, len(text), size):
                yield {"content": text[i : i + size], "done": False}
            calls = self._calls(reply)
            for index, call in enumerate(calls):
                raw = json.dumps(call.get("arguments", {}), ensure_ascii=False)
                half = len(raw) // 2
                yield {
                    "content": "",
                    "done": False,
                    "tool_calls": [
                        {
                            "id": call["id"],
                            "type": "function",
                            "name": call["name"],
                            "raw_arguments": raw[:half],
                            "stream_index": index,
                        }
                    ],
                }
                yield {
                    "content": "",
                    "done": False,
                    "tool_calls": [{"raw_arguments": raw[half:], "stream_index": index}],
                }
            yield {
                "content": "",
                "done": True,
                "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop"),
                "usage": self._usage(request, reply),
            }
            self.completed += 1
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

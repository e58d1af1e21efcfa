"""SSE ``/api/v1/events`` over real HTTP: live deltas, replay, resync, heartbeats, slow and vanishing clients."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from homeagent_core.builtin.webui.events import EventHub
from homeagent_sdk.testing import FakeReply
from homeagent_sdk.types import Event

WebDaemon = Any  # the `daemon` fixture (tests/core/builtin/webui/conftest.py)

WAIT_S = 10.0


@dataclass
class Frame:
    event: str = "message"
    id: str = ""
    data: str = ""
    comment: str = ""

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.data)["payload"]


@dataclass
class SSE:
    """One open SSE connection; :meth:`next` reads the next frame or comment (bounded)."""

    response: httpx.Response
    lines: AsyncIterator[str] = field(init=False)

    def __post_init__(self) -> None:
        self.lines = self.response.aiter_lines()

    async def next(self) -> Frame | None:
        """The next frame; None when the server ended the stream."""
        frame = Frame()
        async with asyncio.timeout(WAIT_S):
            async for line in self.lines:
                if line == "":
                    if frame.data or frame.event != "message":
                        return frame
                    continue
                if line.startswith(":"):
                    return Frame(event="", comment=line[1:].strip())
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "id":
                    frame.id = value
                elif name == "event":
                    frame.event = value
                elif name == "data":
                    frame.data += value
                elif name == "retry":
                    frame.event, frame.data = "retry", value
            return None

    async def until(self, event: str) -> list[Frame]:
        """Frames up to and including the first ``event`` (comments skipped)."""
        seen: list[Frame] = []
        while True:
            frame = await self.next()
            assert frame is not None, f"stream ended before {event!r}; saw {[f.event for f in seen]}"
            if frame.comment:
                continue
            seen.append(frame)
            if frame.event == event:
                return seen


@contextlib.asynccontextmanager
async def sse(daemon: WebDaemon, last_id: str | None = None) -> AsyncIterator[SSE]:
    headers = {"X-API-Key": daemon.api_key, **({"Last-Event-ID": last_id} if last_id else {})}
    async with (
        httpx.AsyncClient(base_url=daemon.url, timeout=WAIT_S) as client,
        client.stream("GET", "/api/v1/events", headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = SSE(response)
        first = await stream.next()
        assert first is not None and (first.event, first.data) == ("retry", "2000")
        yield stream


def hub_of(daemon: WebDaemon) -> EventHub:
    return daemon.plugin.state.hub  # type: ignore[no-any-return]


async def wait_for(predicate, what: str) -> None:
    async with asyncio.timeout(WAIT_S):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_a_client_subscribed_before_the_input_sees_the_first_delta_and_then_the_answer(daemon: WebDaemon):
    daemon.model.chunk_size = 2
    answer = "一二三四五六七八九十"
    daemon.model.add(FakeReply(answer))
    async with sse(daemon) as stream, daemon.client() as client:
        reply = await client.post("/api/v1/chat", json={"message": "数到十"})
        assert reply.json()["response"] == answer
        frames = await stream.until("agent_output")
    deltas = [f for f in frames if f.event == "content_delta"]
    assert "".join(f.payload["content"] for f in deltas) == answer  # nothing lost, the first included
    assert all(f.id == "" for f in deltas)  # deltas carry no id: they are never replayed
    output = frames[-1]
    assert output.payload["content"] == answer and output.id
    assert [f.event for f in frames].index("raw_input") < [f.event for f in frames].index("content_delta")


async def test_a_new_client_gets_the_aggregate_events_replayed_but_never_deltas(daemon: WebDaemon):
    daemon.model.add("第一轮回答", "第二轮回答")
    async with daemon.client() as client:
        await client.post("/api/v1/chat", json={"message": "第一轮"})
        await client.post("/api/v1/chat", json={"message": "第二轮"})
    await daemon.app.bus.drain()
    ring = hub_of(daemon).replay_after(None)
    assert ring and not any(f.event.endswith("_delta") for f in ring)
    async with sse(daemon) as stream:
        replayed = [await stream.next() for _ in ring]
    assert [(f.id, f.event) for f in replayed] == [(f.id, f.event) for f in ring]
    outputs = [f.payload["content"] for f in replayed if f.event == "agent_output"]
    assert outputs == ["第一轮回答", "第二轮回答"]

    # Reconnecting with Last-Event-ID gets exactly what came after it.
    first_output = next(f for f in replayed if f.event == "agent_output")
    after = ring[[f.id for f in ring].index(first_output.id) + 1 :]
    async with sse(daemon, last_id=first_output.id) as stream:
        again = [await stream.next() for _ in after]
    assert [f.id for f in again] == [f.id for f in after]
    assert [f.payload["content"] for f in again if f.event == "agent_output"] == ["第二轮回答"]


async def test_the_replay_keeps_only_the_last_entries_of_its_ring():
    hub = EventHub(replay=3)
    for n in range(5):
        hub.handle(Event(name="tool_call", data={"n": n}, timestamp=1000.0 + n))
        hub.handle(Event(name="content_delta", data={"content": "x"}, timestamp=1000.0 + n))
    frames = hub.replay_after(None)
    assert [json.loads(f.data)["payload"]["n"] for f in frames] == [2, 3, 4]
    assert hub.replay_after(frames[0].id) == frames[1:]
    assert hub.replay_after("1000-1") is None  # fell out of the ring


async def test_an_unknown_last_event_id_asks_the_client_to_resync_and_stays_live(daemon: WebDaemon):
    daemon.model.add("之后的回答")
    async with sse(daemon, last_id="12345-999999") as stream:
        first = await stream.next()
        assert first is not None and first.event == "sync_required" and first.data == "{}"
        async with daemon.client() as client:
            await client.post("/api/v1/chat", json={"message": "还在吗"})
        frames = await stream.until("agent_output")
    assert frames[-1].payload["content"] == "之后的回答"


async def test_an_idle_stream_gets_heartbeats(daemon: WebDaemon):
    hub_of(daemon).heartbeat_s = 0.05
    async with sse(daemon) as stream:
        beats = 0
        while beats < 2:
            frame = await stream.next()
            assert frame is not None
            beats += frame.comment == "heartbeat"


async def test_a_lagging_client_is_told_to_resync_while_others_get_everything(daemon: WebDaemon):
    hub = hub_of(daemon)
    hub.queue_size = 4
    async with sse(daemon) as slow:
        hub.queue_size = 2048
        async with sse(daemon) as fast:
            await wait_for(lambda: hub.client_count == 2, "two clients")
            for n in range(50):  # one burst: the slow client's queue of 4 overflows
                daemon.app.bus.publish("tool_call", {"name": f"t{n}", "channel": "webui"})
            await daemon.app.bus.drain()
            frames = []
            while len(frames) < 50:
                frame = await fast.next()
                assert frame is not None
                if frame.event == "tool_call":
                    frames.append(frame)
            assert [f.payload["name"] for f in frames] == [f"t{n}" for n in range(50)]
            told = await slow.until("sync_required")  # after its replay, and no tool_call at all
            assert [f.event for f in told[:-1]] == [f.event for f in hub.replay_after(None)[: len(told) - 1]]
            assert not any(f.event == "tool_call" for f in told)
            assert await slow.next() is None  # then the server ends its stream
            assert hub.client_count == 1


async def test_a_client_leaving_mid_stream_breaks_neither_the_publisher_nor_other_clients(daemon: WebDaemon):
    hub = hub_of(daemon)
    daemon.model.chunk_size = 1
    answer = "这个回答很长，一个字一个字地流出来，中途有一个客户端断开了连接。"
    daemon.model.add(FakeReply(answer, delay=0.1), "之后一切正常")
    async with sse(daemon) as stays, daemon.client() as client:
        leaving_cm = sse(daemon)
        leaving = await leaving_cm.__aenter__()
        await wait_for(lambda: hub.client_count == 2, "two clients")
        chat = asyncio.create_task(client.post("/api/v1/chat", json={"message": "讲个长的"}))
        first = await leaving.until("content_delta")
        assert first[-1].payload["content"]
        await leaving_cm.__aexit__(None, None, None)  # hangs up mid-reply
        frames = await stays.until("agent_output")
        assert "".join(f.payload["content"] for f in frames if f.event == "content_delta") == answer
        assert (await chat).json()["response"] == answer
        await wait_for(lambda: hub.client_count == 1, "the departed client forgotten")
        again = await client.post("/api/v1/chat", json={"message": "还好吗"})
        assert again.json()["response"] == "之后一切正常"
        later = await stays.until("agent_output")
        assert later[-1].payload["content"] == "之后一切正常"


async def test_events_require_authentication(daemon: WebDaemon):
    async with daemon.client(key=False) as client:
        response = await client.get("/api/v1/events")
    assert response.status_code == 401 and response.json() == {"error": "unauthorized"}


async def test_a_stream_is_subscribed_when_it_is_created_not_when_it_is_first_read():
    hub = EventHub()
    stream = hub.stream(None)
    assert hub.client_count == 1  # before the response has sent a byte
    hub.handle(Event(name="content_delta", data={"content": "第一个字"}, timestamp=1.0))
    retry, first = await anext(stream), await anext(stream)
    assert retry.startswith(b"retry:") and "第一个字".encode() in first and first.startswith(b"event: content_delta")
    await stream.aclose()
    assert hub.client_count == 0


def _published_names() -> set[str]:
    """Event names the package publishes: the literal first argument of each ``publish``, ``_emit``, ``emit`` call."""
    import ast
    from pathlib import Path

    import homeagent_core

    names: set[str] = set()
    for path in Path(homeagent_core.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr in ("publish", "_emit"))
                    # model_answer reads the stream through the turn's emit callback
                    or (isinstance(node.func, ast.Name) and node.func.id == "emit")
                )
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names.add(node.args[0].value)
    return names


def test_the_hub_forwards_only_events_something_publishes():
    from homeagent_core.builtin.webui.events import AGGREGATE, DELTAS

    published = _published_names()
    assert {"agent_output", "content_delta", "raw_input"} <= published  # the scan finds the kernel's events
    never = sorted((AGGREGATE | DELTAS) - published)
    assert not never, f"the web UI's event hub subscribes to {never}, which nothing publishes"

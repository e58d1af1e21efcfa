"""The NDJSON peer and the child runtime, wired back to back in memory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from homeagent_sdk import ChannelDef, StageContext, hookimpl
from homeagent_sdk.proc import ChildRuntime, FrameTooLarge, Peer, PeerClosed, RemoteError


def pair(max_frame: int = 1 << 20) -> tuple[Peer, Peer]:
    """Two peers whose writes land in each other's ``feed`` on the next loop turn."""
    loop = asyncio.get_running_loop()
    a: Peer
    b: Peer
    a = Peer(lambda data: loop.call_soon(b.feed, data), max_frame=max_frame, label="a")
    b = Peer(lambda data: loop.call_soon(a.feed, data), max_frame=max_frame, label="b")
    return a, b


async def test_requests_answers_errors_and_unknown_methods() -> None:
    a, b = pair()

    async def double(params: Any) -> Any:
        return params["n"] * 2

    async def fail(params: Any) -> Any:
        raise ValueError("bad n")

    b.handlers.update({"double": double, "fail": fail})
    assert await a.call("double", {"n": 21}) == 42
    with pytest.raises(RemoteError, match="bad n"):
        await a.call("fail")
    with pytest.raises(RemoteError, match="unknown method: nope"):
        await a.call("nope")


async def test_a_handler_may_call_back_while_the_read_loop_continues() -> None:
    a, b = pair()

    async def outer(params: Any) -> Any:
        return await b.call("inner") + 1

    async def inner(params: Any) -> Any:
        return 41

    b.handlers["outer"] = outer
    a.handlers["inner"] = inner
    assert await asyncio.wait_for(a.call("outer"), 5) == 42


async def test_requests_read_together_never_wait_behind_a_waiting_handler() -> None:
    """A burst of requests in one read: each one that finds the earlier ones waiting still runs,
    handlers run in a task (``asyncio.timeout`` works), and the workers left idle are bounded."""
    sent: list[bytes] = []
    peer = Peer(sent.append)
    released = asyncio.Event()

    async def wait(params: Any) -> Any:
        async with asyncio.timeout(5):
            await released.wait()
        return "waited"

    async def release(params: Any) -> Any:
        released.set()
        return "released"

    peer.handlers.update({"wait": wait, "release": release})
    burst = b"".join(b'{"id":%d,"method":"wait"}\n' % i for i in range(1, 41))
    peer.feed(burst + b'{"id":41,"method":"release"}\n')
    async with asyncio.timeout(5):
        while len(sent) < 41:
            await asyncio.sleep(0)
    answers = sorted(sent)
    assert sum(b'"result":"waited"' in a for a in answers) == 40
    assert any(b'"id":41' in a and b'"released"' in a for a in answers)
    async with asyncio.timeout(5):
        while len(peer._tasks) > 8:
            await asyncio.sleep(0)


async def test_frames_split_and_merged_arbitrarily_are_reassembled() -> None:
    got: list[Any] = []
    peer = Peer(lambda data: None)

    async def note(params: Any) -> None:
        got.append(params)

    peer.handlers["note"] = note
    stream = b'{"id":0,"method":"note","params":1}\n{"id":0,"method":"note","params":"\xe4\xbd\xa0"}\n'
    for i in range(0, len(stream), 7):
        peer.feed(stream[i : i + 7])
    peer.feed(b'{"id":0,"method":"note","params":3}\n{"id":0,"method":"note","params":4}\n')
    await asyncio.sleep(0)
    assert got == [1, "你", 3, 4]


async def test_oversized_frames_fail_the_call_on_both_sides() -> None:
    a, b = pair(max_frame=1024)

    async def big(params: Any) -> Any:
        return "x" * 5000

    b.handlers["big"] = big
    with pytest.raises(FrameTooLarge, match="1024-byte frame cap"):
        await a.call("echo", "y" * 5000)
    with pytest.raises(RemoteError, match="frame cap"):
        await a.call("big")
    # The receiving side refuses oversized frames too, answering with the frame's id.
    sent: list[bytes] = []
    receiver = Peer(sent.append, max_frame=64)
    receiver.feed(b'{"id":7,"method":"x","params":"' + b"z" * 200 + b'"}\n')
    assert b'"id":7' in sent[0] and b"frame cap" in sent[0]


async def test_closing_fails_pending_calls() -> None:
    a, _ = pair()
    a._write = lambda data: None  # the other side never answers
    call = asyncio.ensure_future(a.call("slow"))
    await asyncio.sleep(0)
    a.close(PeerClosed("plugin process exited"))
    with pytest.raises(PeerClosed, match="exited"):
        await call


class Sample:
    name = "sample"
    scope = "own_tools"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        registry.add(self.add_numbers)

    def add_numbers(self, a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    @hookimpl
    def register_output_channels(self, registry: Any) -> None:
        registry.add(ChannelDef(name="box", send=lambda payload, meta, type: self.sent.append((type, payload))))

    @hookimpl
    async def on_input(self, ctx: StageContext) -> None:
        ctx.raw_message = ctx.raw_message.strip()
        ctx.response = None  # cannot un-set a response
        ctx.phase = "tampered"

    @hookimpl
    def before_toolcall(self, ctx: StageContext, call: Any) -> str | None:
        return "refused" if call.arguments.get("a") == 0 else None


async def test_the_child_runtime_registers_and_writes_back_only_changed_fields() -> None:
    host, child = pair()
    runtime = ChildRuntime(Sample())
    runtime.attach(child)
    registered: list[tuple[str, Any]] = []

    def recorder(method: str) -> Any:
        async def handler(params: Any) -> Any:
            registered.append((method, params))
            if method == "settings.dataDir":
                return {"dir": "/tmp"}
            if method == "settings.list":
                return {"values": {}}
            return None

        return handler

    for method in (
        "tool.register",
        "output.register",
        "stage.register",
        "settings.dataDir",
        "settings.list",
        "lifecycle.autoRestart",
    ):
        host.handlers[method] = recorder(method)
    await host.call("plugin.init", {"name": "sample", "config": {}})
    await host.call("plugin.start")
    methods = [m for m, _ in registered]
    assert methods.count("tool.register") == 1 and "output.register" in methods
    stages = {p["stage"]: p["scope"] for m, p in registered if m == "stage.register"}
    assert stages == {"on_input": "own_tools", "before_toolcall": "own_tools"}
    schema = next(p for m, p in registered if m == "tool.register")["def"]["parameters"]
    assert schema["required"] == ["a"] and schema["properties"]["b"]["default"] == 1

    ctx = StageContext(raw_message="  hi  ", response="already", llm_text="keep")
    answer = await host.call("stage.invoke", {"stage": "on_input", "ctx": ctx})
    assert answer["changed"] == {"raw_message": "hi"}
    rejected = await host.call(
        "stage.invoke",
        {"stage": "before_toolcall", "ctx": ctx, "call": {"id": "1", "name": "t", "arguments": {"a": 0}}},
    )
    assert rejected["reject"] == "refused"
    assert (await host.call("tool.invoke", {"name": "add_numbers", "args": {"a": 2}}))["result"] == 3
    sent = await host.call("output.invoke", {"channel": "box", "args": {"payload": "p", "type": "text"}})
    assert sent["status"] == "sent" and runtime.plugin.sent == [("text", "p")]  # type: ignore[attr-defined]
    with pytest.raises(RemoteError, match="未注册的工具"):
        await host.call("tool.invoke", {"name": "missing", "args": {}})


async def test_a_burst_of_frames_reaches_the_pipe_in_groups_in_order() -> None:
    """A lone frame is written at once; a burst goes out in groups of at most eight frames as
    each fills, the remainder when the loop comes round, all in order (a real pipe)."""
    import os

    from homeagent_sdk.proc.wire import FrameBatcher

    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(write_fd, "wb", buffering=0))
    batcher = FrameBatcher(transport)

    def in_pipe() -> list[bytes]:
        try:
            return os.read(read_fd, 1 << 16).splitlines()
        except BlockingIOError:
            return []

    try:
        frames = [b'{"id":%d}\n' % n for n in range(1, 21)]
        batcher.write(frames[0])
        assert in_pipe() == [frames[0].strip()]  # no wait for the loop
        for frame in frames[1:8]:
            batcher.write(frame)
        assert in_pipe() == [] and batcher.pending == sum(map(len, frames[1:8]))
        batcher.write(frames[8])  # the eighth queued frame completes a group
        assert in_pipe() == [f.strip() for f in frames[1:9]]
        for frame in frames[9:]:
            batcher.write(frame)
        assert in_pipe() == [f.strip() for f in frames[9:17]]
        await asyncio.sleep(0)  # the loop comes round: the last three follow
        assert in_pipe() == [f.strip() for f in frames[17:]] and batcher.pending == 0
    finally:
        transport.close()
        os.close(read_fd)


async def test_frames_with_ids_or_methods_of_the_wrong_type_are_skipped_and_the_rest_of_the_read_is_kept() -> None:
    """An id that is a list, an object, a bool or a float, or a method that is not a string, makes
    the frame a bad one: it is reported and skipped, and the valid answers read with it still
    complete their calls."""
    sent: list[bytes] = []
    bad: list[bytes] = []
    ran: list[Any] = []
    peer = Peer(sent.append, on_bad_frame=bad.append)

    async def note(params: Any) -> Any:
        ran.append(params)
        return "noted"

    peer.handlers["note"] = note
    first = asyncio.ensure_future(peer.call("one"))
    second = asyncio.ensure_future(peer.call("two"))
    await asyncio.sleep(0)
    assert len(sent) == 2
    wrong = [
        b'{"id":[1],"result":"list"}',
        b'{"id":{"a":1},"result":"object"}',
        b'{"id":true,"result":"bool"}',
        b'{"id":1.0,"result":"float"}',
        b'{"id":[3],"method":"note","params":"list id"}',
        b'{"id":4,"method":["note"],"params":"list method"}',
        b'{"id":5,"method":{"n":1},"params":"object method"}',
        b'{"id":6,"method":7,"params":"number method"}',
    ]
    good = [b'{"id":1,"result":"first"}', b'{"id":8,"method":"note","params":"kept"}', b'{"id":2,"result":"second"}']
    peer.feed(b"\n".join([wrong[0], good[0], *wrong[1:4], good[1], *wrong[4:], good[2]]) + b"\n")
    async with asyncio.timeout(5):
        assert await first == "first"
        assert await second == "second"
        while len(sent) < 3:
            await asyncio.sleep(0)
    assert bad == wrong
    assert ran == ["kept"]
    assert sent[2] == b'{"id":8,"result":"noted"}\n'
    # The same frames split over several reads (the buffered path) are handled alike.
    bad.clear()
    third = asyncio.ensure_future(peer.call("three"))
    await asyncio.sleep(0)
    stream = b'{"id":[3],"result":"x"}\n{"id":3,"result":"third"}\n'
    for i in range(0, len(stream), 5):
        peer.feed(stream[i : i + 5])
    async with asyncio.timeout(5):
        assert await third == "third"
    assert bad == [b'{"id":[3],"result":"x"}']

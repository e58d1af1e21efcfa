"""The event bus never lets a subscriber slow down or break the publisher."""

from __future__ import annotations

import asyncio

from homeagent_core.events import EventBus


async def test_subscribers_get_the_events_they_asked_for():
    bus = EventBus()
    got: list[str] = []
    bus.subscribe(lambda e: got.append(e.name), "agent_output")
    bus.publish("tool_call", {"name": "x"})
    bus.publish("agent_output", {"text": "hi"})
    await bus.drain()
    assert got == ["agent_output"]
    await bus.aclose()


async def test_a_slow_subscriber_does_not_block_the_publisher_or_other_subscribers():
    bus = EventBus()
    release = asyncio.Event()
    fast: list[int] = []

    async def slow(event):
        await release.wait()

    bus.subscribe(slow)
    bus.subscribe(lambda e: fast.append(e.data["i"]))
    for i in range(100):  # returns although `slow` has not finished a single event
        bus.publish("content_delta", {"i": i})
    async with asyncio.timeout(5):
        while len(fast) < 100:
            await asyncio.sleep(0)
    assert fast == list(range(100))
    release.set()
    await bus.drain()
    await bus.aclose()


async def test_a_failing_subscriber_is_logged_and_delivery_goes_on(caplog):
    bus = EventBus()
    got: list[int] = []

    def broken(event):
        raise RuntimeError("subscriber bug")

    bus.subscribe(broken, label="broken")
    bus.subscribe(lambda e: got.append(e.data["i"]))
    bus.publish("system", {"i": 1})
    bus.publish("system", {"i": 2})
    await bus.drain()
    assert got == [1, 2]
    assert "subscriber broken failed" in caplog.text
    await bus.aclose()


async def test_a_full_subscriber_queue_drops_its_own_events_only():
    bus = EventBus()
    release = asyncio.Event()

    async def stuck(event):
        await release.wait()

    bus.subscribe(stuck, maxsize=2, label="stuck")
    for _ in range(10):
        bus.publish("content_delta", {})
    sub = bus._subs[0]
    assert sub.dropped >= 7
    release.set()
    await bus.drain()
    await bus.aclose()


async def test_unsubscribe_stops_delivery():
    bus = EventBus()
    got: list[str] = []
    stop = bus.subscribe(lambda e: got.append(e.name))
    bus.publish("a")
    await bus.drain()
    stop()
    bus.publish("b")
    await asyncio.sleep(0)
    assert got == ["a"]
    await bus.aclose()


def test_publishing_without_a_loop_calls_subscribers_directly():
    bus = EventBus()
    got: list[str] = []
    bus.subscribe(lambda e: got.append(e.name))
    bus.publish("system")
    assert got == ["system"]
